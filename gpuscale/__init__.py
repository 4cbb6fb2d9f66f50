"""gpuscale: will this training job run faster on several GPUs, or am I paying for communication?

A run is a stream of typed events (``events/``). Sources produce it: the trainer
(``trainer/``, its own process), the user's script (``keras/``), telemetry
(``telemetry/``), a recording (``recording/``), all started and watched from
gpuscale's side by ``live/``. Consumers read it: the recorder (``recording/``),
the analysis (``analysis/``), the dashboard (``ui/``) and the CLI
(``commands/``). See ``docs/architecture.md`` for the map and the import layers.
"""

__version__ = "0.1.0"
