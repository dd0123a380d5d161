"""Forms of the invite pages: one invite, a list of addresses, and the two ways to accept."""
from django import forms
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.validators import UnicodeUsernameValidator

from annotations.invites import DEFAULT_INVITE_DAYS, MAX_INVITE_DAYS
from experiments.web.bounded_input import INTEGER_COLUMN_MAX, BoundedIntegerField
from experiments.web.text_input import StorableTextMixin

MAX_CSV_BYTES = 256 * 1024
USERNAME_TAKEN = "taken"
MAX_PASSWORD_CHARS = 512  # a password longer than this is a paste gone wrong, not a password


def _days_field():
    return BoundedIntegerField(initial=DEFAULT_INVITE_DAYS, min_value=1, max_value=MAX_INVITE_DAYS,
                               column_max=INTEGER_COLUMN_MAX, label="Valid for (days)",
                               help_text=f"1 to {MAX_INVITE_DAYS}; the link stops working after that")


class InviteForm(StorableTextMixin, forms.Form):
    days = _days_field()


class BulkInviteForm(StorableTextMixin, forms.Form):
    days = _days_field()
    addresses = forms.FileField(label="CSV of e-mail addresses",
                                help_text="one column, one address a row; a header row is optional")

    def clean_addresses(self):
        upload = self.cleaned_data["addresses"]
        if upload.size > MAX_CSV_BYTES:
            raise forms.ValidationError(f"at most {MAX_CSV_BYTES // 1024} KB")
        try:
            return upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError("the file is not UTF-8 text") from None


class AcceptNewForm(StorableTextMixin, forms.Form):
    """A new account: a free username and a password Django's validators accept, typed twice."""

    username = forms.CharField(max_length=150, validators=[UnicodeUsernameValidator()],
                               help_text="letters, digits and @ . + - _")
    password1 = forms.CharField(label="Password", max_length=MAX_PASSWORD_CHARS, strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))
    password2 = forms.CharField(label="Password again", max_length=MAX_PASSWORD_CHARS, strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean_username(self):
        name = self.cleaned_data["username"]
        if get_user_model().objects.filter(username__iexact=name).exists():
            raise forms.ValidationError("this username is taken; choose another, or sign in below if it is yours",
                                        code=USERNAME_TAKEN)
        return name

    def clean(self):
        data = super().clean()
        first, second = data.get("password1"), data.get("password2")
        if first and second:
            if first != second:
                self.add_error("password2", "the two passwords differ")
            else:
                try:
                    password_validation.validate_password(first, get_user_model()(username=data.get("username", "")))
                except forms.ValidationError as e:
                    self.add_error("password1", e)
        return data


class AcceptLoginForm(StorableTextMixin, forms.Form):
    """An existing account: its username and password, checked like the login page's (django-axes)."""

    username = forms.CharField(max_length=150)
    password = forms.CharField(max_length=MAX_PASSWORD_CHARS, strip=False,
                               widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}))
