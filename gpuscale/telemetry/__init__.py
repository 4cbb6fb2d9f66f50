"""Telemetry: NVML per-GPU samples and psutil host samples, as schema events.

``nvml`` is the one choke point for NVML calls and the probe of what NVML sees;
``host`` samples the host and the run's processes; ``sampler`` runs both in a
background thread and emits :class:`~gpuscale.events.schema.GpuSample`,
:class:`~gpuscale.events.schema.HostSample` and
:class:`~gpuscale.events.schema.LogEvent` events. Imports neither TensorFlow nor
Textual.
"""
