"""The application layer: one Python call per command, composing the studies and the deployment tools.

:func:`~policyopt.app.schedule.design_deployment` is ``policyopt schedule``: its report's ``to_dict()`` is the command's
``--json`` object and ``str()`` its text.  The command line (:mod:`policyopt.cli`) only parses options into
:class:`~policyopt.app.design_options.DesignOptions` and prints; the loading of a deployment (readings, pilot chains, I,
value range, MSE penalty) lives in :mod:`policyopt.app.inputs`.
"""
