"""The form half of `EncryptedTextField`: secrets are write-only in the admin.

A secret field renders empty, with the stored value masked to its last 4 characters beside it;
a submitted empty field keeps the stored secret, a typed value replaces it. The clear value is
never sent to a browser.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms

from ingest.engine.secrets import mask


class WriteOnlySecretsForm(forms.ModelForm):  # type: ignore[type-arg]
    """A ModelForm whose `secret_fields` are write-only (set the tuple in a subclass)."""

    secret_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in self.secret_fields:
            if name not in self.fields:
                continue
            stored = str(getattr(self.instance, name, "") or "") if self.instance.pk else ""
            self.initial[name] = ""
            self.fields[name] = forms.CharField(
                required=False,
                label=self.fields[name].label,
                strip=True,
                widget=forms.PasswordInput(
                    render_value=False, attrs={"autocomplete": "new-password", "placeholder": mask(stored) or "not set"}
                ),
                help_text=(
                    f"Stored: {mask(stored)}. Leave empty to keep it; type a new value to replace it."
                    if stored
                    else "Not set."
                ),
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in self.secret_fields:
            if name in cleaned and not cleaned[name] and self.instance.pk:
                cleaned[name] = getattr(self.instance, name)
        return cleaned
