"""A one-machine launch keeps every socket on loopback (gloo here; the same
worker checked NCCL on a GPU: data/runs/nccl-loopback-h200x1.json)."""

from ddp_lessons import launch
from ddp_lessons.cases.intro.sockets import beyond_loopback, listening_sockets


def test_gloo_ranks_listen_on_loopback_only_and_nccl_is_told_to():
    out = launch(listening_sockets, world_size=2)
    for r in out:
        assert r["listen_tcp"], "a gloo rank should listen for its peer"
        assert beyond_loopback(r["listen_tcp"] + r["udp"]) == []
        assert r["env"] == {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}


def test_beyond_loopback_tells_addresses_apart():
    assert beyond_loopback([("127.0.0.1", 1), ("127.8.0.1", 2), ("::1", 3), ("192.0.2.2", 4), ("::", 5)]) \
        == [("192.0.2.2", 4), ("::", 5)]
