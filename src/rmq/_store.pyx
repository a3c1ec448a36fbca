# placeholder: replaced by the store core (issue 2)
