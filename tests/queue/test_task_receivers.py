"""``Receivers.send`` delivers to exactly the receivers ``Signal.send`` would, as they change:
connected, disconnected, dead (weakly held), for another sender, asynchronous."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from django.dispatch import Signal

from django_redislock.tasks.receivers import Receivers, receivers


class Sender:
    pass


class Other:
    pass


def test_sends_to_the_receivers_of_its_sender_in_order_and_follows_connects() -> None:
    signal = Signal()
    seen: list[tuple[str, Any, Any]] = []

    def first(sender: Any, value: Any, **kwargs: Any) -> None:
        seen.append(("first", sender, value))

    def second(sender: Any, value: Any, **kwargs: Any) -> None:
        seen.append(("second", sender, value))

    def elsewhere(sender: Any, value: Any, **kwargs: Any) -> None:
        seen.append(("elsewhere", sender, value))

    sending = Receivers(signal, Sender)
    sending.send(value=0)  # nothing connected
    signal.connect(first)
    signal.connect(elsewhere, sender=Other)
    sending.send(value=1)
    sending.send(value=2)
    signal.connect(second, sender=Sender)
    sending.send(value=3)
    signal.disconnect(first)
    sending.send(value=4)
    assert seen == [
        ("first", Sender, 1),
        ("first", Sender, 2),
        ("first", Sender, 3),
        ("second", Sender, 3),
        ("second", Sender, 4),
    ]


def test_a_receiver_disconnected_and_another_connected_in_its_place_is_seen() -> None:
    signal = Signal()
    seen: list[str] = []

    def one(**kwargs: Any) -> None:
        seen.append("one")

    def two(**kwargs: Any) -> None:
        seen.append("two")

    sending = Receivers(signal, Sender)
    signal.connect(one)
    sending.send()
    signal.disconnect(one)
    signal.connect(two)
    sending.send()
    assert seen == ["one", "two"]


def test_a_weakly_held_receiver_that_died_is_not_called_nor_kept_alive() -> None:
    signal = Signal()
    seen: list[str] = []

    class Listener:
        def on(self, **kwargs: Any) -> None:
            seen.append("listener")

    listener = Listener()
    signal.connect(listener.on)
    sending = Receivers(signal, Sender)
    sending.send()
    del listener
    gc.collect()
    sending.send()
    assert seen == ["listener"]
    assert not signal.has_listeners(Sender)


def test_asynchronous_receivers_go_through_signal_send() -> None:
    signal = Signal()
    seen: list[str] = []

    def plain(**kwargs: Any) -> None:
        seen.append("plain")

    async def later(**kwargs: Any) -> None:
        seen.append("async")

    signal.connect(plain)
    signal.connect(later)
    Receivers(signal, Sender).send()
    assert seen == ["plain", "async"]


def test_a_receiver_that_raises_stops_the_sending_as_signal_send_does() -> None:
    signal = Signal()
    seen: list[str] = []

    def broken(**kwargs: Any) -> None:
        raise ValueError("broken")

    def after(**kwargs: Any) -> None:
        seen.append("after")

    signal.connect(broken)
    signal.connect(after)
    with pytest.raises(ValueError, match="broken"):
        Receivers(signal, Sender).send()
    assert seen == []


def test_one_receivers_per_signal_and_sender() -> None:
    signal = Signal()
    assert receivers(signal, Sender) is receivers(signal, Sender)
    assert receivers(signal, Sender) is not receivers(signal, Other)
