# placeholder: replaced by the IndexFile (issue 2)
