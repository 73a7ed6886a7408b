"""The Preferences dialog (:mod:`.dialog`) and its pages, one widget per tab, each owning its fields.

Import from the modules themselves (``kmds_desktop.ui.preferences.dialog`` and so on): this package
re-exports nothing, so a reader sees which module a name comes from.
"""
