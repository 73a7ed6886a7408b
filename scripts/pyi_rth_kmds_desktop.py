"""PyInstaller runtime hook of the KMDS Desktop bundle: runs before the app's own code.

Why: the bundle's launcher points ``LD_LIBRARY_PATH`` at the bundle's library folder so the frozen
interpreter finds its libraries. Programs the app starts (the embedded PostgreSQL's ``initdb``,
``pg_ctl`` and ``postgres``, ``useradd``) would inherit that and load the bundle's copies of
system libraries instead of their own. The dynamic loader reads the variable only when a process
starts, so restoring the user's original value here changes nothing for the running app and gives
child processes a clean environment.
"""

import os
import sys

if getattr(sys, "frozen", False) and sys.platform.startswith("linux"):
    _orig = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if _orig is not None:
        os.environ["LD_LIBRARY_PATH"] = _orig
    else:
        os.environ.pop("LD_LIBRARY_PATH", None)
