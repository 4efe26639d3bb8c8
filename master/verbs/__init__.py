"""The `perffarm` verbs whose code is more than a screen: each module adds its verb's arguments and runs it
(master/cli.py mounts them, importing one only when its verb is used).

They live here, above the farm's settings and its feature packages, not inside those packages: a verb reads the
settings (`master.settings`), which read the packages' own settings (`detect.config`, `alerts.config`), so a verb
inside a package made the package import the settings that import it (issue #30).
"""
