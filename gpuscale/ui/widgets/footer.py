"""The footer, in one order whatever has the focus.

Textual's footer lists the keys in the order of the focused widget's bindings
first: after Tab to a scrolling panel (which binds the arrows too) ``←/→ Seek``
jumped to the front. This one lists them in the order of the app's ``BINDINGS``
(:mod:`gpuscale.ui.keys`), the others after them as they come; a key the app's
``footer_hides(action)`` says is not offered now (``e`` before a run failed) is left out.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class StableFooter(Footer):
    """:class:`~textual.widgets.Footer` with the keys always in the app's order."""

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        order: dict[str, int] = {}
        for binding in self.app.BINDINGS:
            action = binding.action if hasattr(binding, "action") else binding[1]
            order.setdefault(action, len(order))
        by_action: dict[str, tuple] = {}
        active = self.screen.active_bindings
        hides = getattr(self.app, "footer_hides", None)  # keys that work, not offered now
        for _, binding, enabled, tooltip in active.values():
            if hides is not None and hides(binding.action):
                continue
            if binding.show and binding.action not in by_action:
                by_action[binding.action] = (binding, enabled, tooltip)
        shown = sorted(
            by_action.values(),
            key=lambda item: order.get(item[0].action, len(order)),
        )
        self.styles.grid_size_columns = len(shown)
        for binding, enabled, tooltip in shown:
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                disabled=not enabled,
                tooltip=tooltip,
            ).data_bind(compact=Footer.compact)
        palette = active.get(self.app.COMMAND_PALETTE_BINDING)
        if palette is not None and self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            _node, binding, enabled, _tooltip = palette
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                classes="-command-palette",
                disabled=not enabled,
                tooltip=binding.tooltip or binding.description,
            )
