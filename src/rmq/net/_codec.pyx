# placeholder: replaced by the frame codec (issue 3)
