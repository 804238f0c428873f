"""Input of every change, validated before anything is sent (names as RocketMQ checks them)."""

from __future__ import annotations

import re
from datetime import datetime

from django import forms

NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
PERMS = [(6, "6 read/write"), (4, "4 read"), (2, "2 write")]


def _name(value: str, what: str, max_len: int) -> str:
    if not NAME_RE.match(value) or len(value) > max_len:
        raise forms.ValidationError(f"illegal {what} name (letters, digits, %, |, _ and - only, at most {max_len})")
    return value


class TopicForm(forms.Form):
    topic = forms.CharField(max_length=127)
    cluster = forms.CharField(max_length=255)
    read_queue_nums = forms.IntegerField(min_value=1, max_value=1024, initial=8)
    write_queue_nums = forms.IntegerField(min_value=1, max_value=1024, initial=8)
    perm = forms.TypedChoiceField(choices=PERMS, coerce=int, initial=6)
    order = forms.BooleanField(required=False)

    def clean_topic(self) -> str:
        return _name(self.cleaned_data["topic"], "topic", 127)


class TopicPermForm(forms.Form):
    perm = forms.TypedChoiceField(choices=PERMS, coerce=int)


class SendMessageForm(forms.Form):
    tags = forms.CharField(max_length=255, required=False)
    keys = forms.CharField(max_length=255, required=False, help_text="space-separated")
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=65536)


class ResetOffsetForm(forms.Form):
    topic = forms.CharField(max_length=127)
    timestamp = forms.CharField(max_length=32, help_text="yyyy-mm-dd hh:mm:ss, 'earliest' or 'latest'",
                                initial="earliest")

    def clean_topic(self) -> str:
        return _name(self.cleaned_data["topic"], "topic", 127)

    def clean_timestamp(self) -> int:
        """Epoch ms; 0 earliest, -1 latest (mqadmin's ``-s 0`` / ``-s -1``)."""
        value = self.cleaned_data["timestamp"].strip()
        if value == "earliest":
            return 0
        if value == "latest":
            return -1
        if value.isdigit():
            return int(value)
        try:
            return int(datetime.fromisoformat(value).timestamp() * 1000)
        except ValueError:
            raise forms.ValidationError("a time as yyyy-mm-dd hh:mm:ss, epoch ms, 'earliest' or 'latest'") from None


class GroupConfigForm(forms.Form):
    group = forms.CharField(max_length=255)
    cluster = forms.CharField(max_length=255)
    consume_enable = forms.BooleanField(required=False, initial=True)
    consume_broadcast_enable = forms.BooleanField(required=False)
    consume_from_min_enable = forms.BooleanField(required=False)
    notify_consumer_ids_changed_enable = forms.BooleanField(required=False, initial=True)
    retry_queue_nums = forms.IntegerField(min_value=0, max_value=64, initial=1)
    retry_max_times = forms.IntegerField(min_value=-1, max_value=1000, initial=16)
    broker_id = forms.IntegerField(min_value=0, max_value=1024, initial=0, required=False)
    which_broker_when_consume_slowly = forms.IntegerField(min_value=0, max_value=1024, initial=1, required=False)

    def clean(self) -> dict:
        data = super().clean() or {}
        for name in ("broker_id", "which_broker_when_consume_slowly"):  # optional: mqadmin's default
            if data.get(name) is None:
                data[name] = self.fields[name].initial
        return data

    def clean_group(self) -> str:
        return _name(self.cleaned_data["group"], "group", 255)


class ResendForm(forms.Form):
    group = forms.CharField(max_length=255)
    client_id = forms.CharField(max_length=255, required=False)

    def clean_group(self) -> str:
        return _name(self.cleaned_data["group"], "group", 255)


class TimeRangeForm(forms.Form):
    topic = forms.CharField(max_length=127)
    begin = forms.DateTimeField(required=False)
    end = forms.DateTimeField(required=False)
    page = forms.IntegerField(min_value=1, required=False)

    def clean_topic(self) -> str:
        return _name(self.cleaned_data["topic"], "topic", 127)


class LagThresholdForm(forms.Form):
    group = forms.CharField(max_length=255)
    max_lag = forms.IntegerField(min_value=0, max_value=2**62, initial=1000)
    enabled = forms.BooleanField(required=False, initial=True)

    def clean_group(self) -> str:
        return _name(self.cleaned_data["group"], "group", 255)


ACL_KEY_RE = re.compile(r"^[A-Za-z0-9_-]{7,64}$")
ACL_PERMS = [("DENY", "DENY"), ("PUB", "PUB"), ("SUB", "SUB"), ("PUB|SUB", "PUB|SUB")]
RESOURCE_PERM_RE = re.compile(r"^[%|a-zA-Z0-9_-]{1,255}=(DENY|PUB|SUB|PUB\|SUB)$")
ADDRESS_RE = re.compile(r"^[0-9A-Fa-f.:*{}/-]{1,64}$")


def _lines(text: str, pattern: re.Pattern[str], what: str) -> list[str]:
    items = [x.strip() for x in text.replace(",", "\n").splitlines() if x.strip()]
    bad = [x for x in items if not pattern.match(x)]
    if bad:
        raise forms.ValidationError(f"not a {what}: {', '.join(bad[:3])}")
    return items


class _ClusterForm(forms.Form):
    cluster = forms.CharField(max_length=255)

    def clean_cluster(self) -> str:
        return _name(self.cleaned_data["cluster"], "cluster", 255)


class AclAccountForm(_ClusterForm):
    """A plain-ACL account (``mqadmin updateAclConfig``); perms one ``name=PERM`` per line."""

    access_key = forms.CharField(max_length=64)
    secret_key = forms.CharField(max_length=64, widget=forms.PasswordInput)
    white_remote_address = forms.CharField(max_length=64, required=False)
    admin = forms.BooleanField(required=False)
    default_topic_perm = forms.ChoiceField(choices=ACL_PERMS, initial="DENY")
    default_group_perm = forms.ChoiceField(choices=ACL_PERMS, initial="SUB")
    topic_perms = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), max_length=8192)
    group_perms = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), max_length=8192)

    def clean_access_key(self) -> str:
        v = self.cleaned_data["access_key"]
        if not ACL_KEY_RE.match(v):
            raise forms.ValidationError("7 to 64 letters, digits, _ or -")
        return v

    def clean_secret_key(self) -> str:
        v = self.cleaned_data["secret_key"]
        if not ACL_KEY_RE.match(v):
            raise forms.ValidationError("7 to 64 letters, digits, _ or -")
        return v

    def clean_white_remote_address(self) -> str:
        v = self.cleaned_data["white_remote_address"].strip()
        if v and not ADDRESS_RE.match(v):
            raise forms.ValidationError("not an address pattern (e.g. 192.168.0.*)")
        return v

    def clean_topic_perms(self) -> list[str]:
        return _lines(self.cleaned_data["topic_perms"], RESOURCE_PERM_RE, "topic=PERM")

    def clean_group_perms(self) -> list[str]:
        return _lines(self.cleaned_data["group_perms"], RESOURCE_PERM_RE, "group=PERM")


class AclDeleteForm(_ClusterForm):
    access_key = forms.CharField(max_length=64)

    def clean_access_key(self) -> str:
        v = self.cleaned_data["access_key"]
        if not ACL_KEY_RE.match(v):
            raise forms.ValidationError("7 to 64 letters, digits, _ or -")
        return v


class WhiteListForm(_ClusterForm):
    """The global white list: address patterns, comma or line separated (empty clears it)."""

    addresses = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=8192)

    def clean_addresses(self) -> list[str]:
        return _lines(self.cleaned_data["addresses"], ADDRESS_RE, "address pattern")
