"""Change-detection statistics core: pure Python (numpy/scipy), no Buildbot or Twisted imports.

A package's face only: import the module you use (`offline.detect`, `online.gate`, `model.Series`, `config` for
the `[detection]` settings). Importing `master.detect.config` must not load numpy and scipy: the settings, and with
them every `perffarm` command, read it.
"""
