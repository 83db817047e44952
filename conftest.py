"""Collection for the doctests of the package (``--doctest-modules``).

The transformers integration is an optional extra: without it installed, its module
cannot be imported, so its doctests are not collected (its tests skip, saying why).
"""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("transformers") else ["ckpt_action/integrations/transformers.py"]
