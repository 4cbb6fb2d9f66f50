"""The Textual dashboard (``gpuscale watch``, ``gpuscale replay``).

Importing this package imports nothing heavy: ``gpuscale.ui.app`` and
``gpuscale.ui.widgets`` need Textual, while ``gpuscale.ui.model``,
``gpuscale.ui.sources`` and ``gpuscale.ui.synthetic`` are headless (no
Textual, no TensorFlow) and are tested as such.
"""
