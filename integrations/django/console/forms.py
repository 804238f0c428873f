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
