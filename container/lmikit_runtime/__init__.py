"""lmikit's start-up step inside the LMI image: LMCache sizing, secrets, metrics front.

Standard library, PyYAML and what the LMI image ships only. ``lmikit.sizing`` (the
planner's arithmetic) is copied into the image next to this package.
"""
