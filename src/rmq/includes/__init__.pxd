# C declarations shared by the .pyx files of several areas (uvloop's includes/ shape): .pxd only,
# nothing here is a module at run time, so any layer may cimport them (tests/test_imports.py: neutral).
