"""One module per button: its click's checks and answer (`BUTTON`, a handlers.clicks.Button).

What each button is called, carries and looks like is core's (core/buttons/, core/log_more.py),
so notices built in core can carry buttons; registry.py registers every button of `BUTTONS`.
"""
