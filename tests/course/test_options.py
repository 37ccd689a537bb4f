"""Options refuse nonsense: every choice, bool, count and rate of both cases is checked when
set; presets, roles, overrides and pickling behave as the training loop needs. Expected values
are written out by hand (the options as they were before typing), not derived from the code."""

import dataclasses
import math
import pickle
import typing

import pytest

from ddp_lessons.cases import case1, case2
from ddp_lessons import cli
from ddp_lessons.course.options import ROLES, option

C1, C2 = case1.Options, case2.Options
CLASSES = {"case1": C1, "case2": C2}

# -- hand-written expectations -------------------------------------------------
CHOICES = {
    "case1": {
        "model": ("tiny", "m3ae"),
        "setup": ("posted", "answer"),
        "wrap_when": ("always", "device_count>1"),
        "batch": ("same", "halved", "scale_lr"),
        "log_ranks": ("all", "rank0"),
        "num_workers": ("cores",),          # or an int >= 0
        "loss_accum": ("tensor", "item", "detach"),
        "schedule": ("entries", "steps"),
        "evaluation": ("rank0", "distributed", "none"),
        "comm_dtype": ("bf16", "fp16"),     # or None
    },
    "case2": {"nvml": ("step", "off")},
}
BOOLS = {
    "case1": ["find_unused_parameters", "drop_heads", "static_graph", "train_mode_each_epoch",
              "set_epoch", "barrier_timing", "gradient_as_bucket_view", "amp", "pin_memory",
              "persistent_workers"],
    "case2": ["randn_in_getitem", "fix_loss_shape", "log_every_step"],
}
ROLE_TABLE = {
    "case1": {
        "workload": ["model", "batch_size", "lr"],
        "switch": ["setup", "wrap_when", "batch", "log_ranks", "num_workers", "loss_accum",
                   "find_unused_parameters", "drop_heads", "static_graph", "schedule", "evaluation",
                   "train_mode_each_epoch", "set_epoch", "bucket_cap_mb", "gradient_as_bucket_view",
                   "amp", "comm_dtype", "pin_memory", "persistent_workers"],
        "measurement": ["barrier_timing", "steps_limit", "seed"],
    },
    "case2": {
        "workload": ["batch_size", "size", "epochs", "width", "depth", "lr"],
        "switch": ["accumulate", "randn_in_getitem", "fix_loss_shape", "nvml", "log_every_step",
                   "log_every", "val_every"],
        "measurement": ["val_batches", "train_batches", "seed"],
    },
}
BROKEN = dict(model="tiny", batch_size=8, lr=2e-4, setup="posted", wrap_when="always", batch="same",
              log_ranks="all", num_workers=4, loss_accum="tensor", find_unused_parameters=True,
              drop_heads=False, static_graph=False, schedule="entries", evaluation="rank0",
              train_mode_each_epoch=False, set_epoch=True, barrier_timing=False, bucket_cap_mb=25.0,
              gradient_as_bucket_view=False, amp=False, comm_dtype=None, pin_memory=False,
              persistent_workers=False, steps_limit=None, seed=0)
# The presets as changes written out by hand (the same dicts as before typing).
ANSWER = BROKEN | dict(setup="answer", find_unused_parameters=False, num_workers=8,
                       loss_accum="item", log_ranks="rank0")
FIXED = BROKEN | dict(setup="answer", find_unused_parameters=False, drop_heads=True, batch="scale_lr",
                      num_workers="cores", loss_accum="detach", log_ranks="rank0", schedule="steps",
                      evaluation="distributed", train_mode_each_epoch=True, barrier_timing=True,
                      gradient_as_bucket_view=True, pin_memory=True, persistent_workers=True)
POSTED2 = dict(batch_size=256, size=5000, epochs=200, accumulate=3, width=256, depth=3,
               randn_in_getitem=True, fix_loss_shape=False, nvml="step", log_every_step=True,
               log_every=50, val_every=1, val_batches=1.0, train_batches=1.0, lr=0.01, seed=0)
FIXED2 = POSTED2 | dict(randn_in_getitem=False, fix_loss_shape=True, nvml="off",
                       log_every_step=False, val_every=0, accumulate=1)


def _same(got: dict, want: dict):
    assert list(got) == list(want)               # field order: diff() prints in it
    assert got == want
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}


# -- choices -------------------------------------------------------------------
def test_the_issue_example_is_one_line_naming_field_value_and_choices():
    with pytest.raises(ValueError) as e:
        C1(batch="halve")
    assert str(e.value) == "case1.Options.batch='halve': use one of 'same', 'halved', 'scale_lr'"


@pytest.mark.parametrize("case", CLASSES)
def test_choice_fields_are_the_ones_written_down(case):
    # A field that silently loses its Literal (or gains one) fails here.
    assert CLASSES[case].choices() == CHOICES[case]


def _choice_params():
    found = {(case, name) for case, cls in CLASSES.items() for name in cls.choices()}
    written = {(case, name) for case, names in CHOICES.items() for name in names}
    return sorted(found | written)


@pytest.mark.parametrize("case,name", _choice_params())
def test_every_choice_field_refuses_an_unknown_value(case, name):
    cls = CLASSES[case]
    for bad in ("no-such-value", "", name.upper()):
        with pytest.raises(ValueError) as e:
            cls(**{name: bad})
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(f"{case}.Options.{name}={bad!r}: use ")
        assert all(repr(a) in msg for a in CHOICES[case][name])


@pytest.mark.parametrize("case,name", _choice_params())
def test_every_choice_field_takes_each_allowed_value(case, name):
    for value in CHOICES[case][name]:
        assert getattr(CLASSES[case](**{name: value}), name) == value


def test_mixed_choices_take_their_other_member_and_nothing_else():
    assert C1(num_workers=0).num_workers == 0 and C1(comm_dtype=None).comm_dtype is None
    for bad in ("4", 2.0, True, -1, "none"):
        with pytest.raises(ValueError, match=r"num_workers=.*: use an int >= 0 or 'cores'$"):
            C1(num_workers=bad)
    with pytest.raises(ValueError, match=r"comm_dtype='none': use one of 'bf16', 'fp16' or None$"):
        C1(comm_dtype="none")   # one spelling for "no compression": None


# -- bools, ints, ranges -------------------------------------------------------
@pytest.mark.parametrize("case,name", sorted(
    {(c, n) for c, names in BOOLS.items() for n in names}
    | {(c, n) for c, cls in CLASSES.items() for n, t in typing.get_type_hints(cls).items() if t is bool}))
def test_bool_fields_take_only_bools(case, name):
    cls = CLASSES[case]
    assert typing.get_type_hints(cls)[name] is bool
    for bad in ("yes", "true", 1, 0, None):
        with pytest.raises(ValueError, match=rf"^{case}\.Options\.{name}=.*: use True or False$"):
            cls(**{name: bad})


RANGES = [  # (case, field, refused, accepted)
    ("case1", "batch_size", [0, -8, True, 8.0, "8"], [1, 64]),
    ("case1", "lr", [0, -1e-3, math.nan, math.inf, "1e-3", True], [1e-3, 1]),
    ("case1", "steps_limit", [0, -1, 2.0, "none"], [None, 1, 100]),
    ("case1", "bucket_cap_mb", [0, -1.0, math.nan, "25"], [1, 0.5, 25.0]),
    ("case1", "num_workers", [-1], [0, 8]),
    ("case1", "seed", [1.0, "0", False], [0, 1234]),
    ("case2", "batch_size", [0, 1.5], [1, 256]),
    ("case2", "size", [0, -5], [1, 5000]),
    ("case2", "epochs", [0, 1.0], [1, 200]),
    ("case2", "accumulate", [0, -1, True], [1, 3]),
    ("case2", "width", [0], [1, 4096]),
    ("case2", "depth", [0], [1, 5]),
    ("case2", "val_every", [-1, 1.0], [0, 1, 10]),
    ("case2", "log_every", [0, -50], [1, 50]),
    ("case2", "val_batches", [0, 0.0, 1.5, 2.0, -1, math.nan, True, "all"], [0.25, 1.0, 1, 2]),
    ("case2", "train_batches", [0, 0.0, 6.0, -0.5], [0.5, 1.0, 6]),
    ("case2", "lr", [0, -0.01], [0.01]),
]


@pytest.mark.parametrize("case,name,refused,accepted", RANGES)
def test_counts_and_rates_refuse_nonsense(case, name, refused, accepted):
    cls = CLASSES[case]
    for bad in refused:
        with pytest.raises(ValueError, match=rf"^{case}\.Options\.{name}=.*: use "):
            cls(**{name: bad})
    for good in accepted:
        assert getattr(cls(**{name: good}), name) == good


# -- presets ---------------------------------------------------------------------
def test_case1_presets_are_unchanged():
    _same(dataclasses.asdict(C1()), BROKEN)
    _same(dataclasses.asdict(C1.broken()), BROKEN)
    _same(dataclasses.asdict(C1.answer()), ANSWER)
    _same(dataclasses.asdict(C1.fixed()), FIXED)
    for name in ("broken", "answer", "fixed"):
        assert C1.preset(name) == getattr(C1, name)()


def test_case2_presets_are_unchanged():
    _same(dataclasses.asdict(C2()), POSTED2)
    _same(dataclasses.asdict(C2.posted()), POSTED2)
    _same(dataclasses.asdict(C2.fixed()), FIXED2)
    assert C2.preset("fixed") == C2.fixed() and C2.preset("posted") == C2()


def test_presets_take_overrides_and_check_them():
    o = C1.fixed(num_workers=0, evaluation="none")
    assert (o.num_workers, o.evaluation, o.drop_heads) == (0, "none", True)
    assert C2.fixed(epochs=2, accumulate=3).accumulate == 3
    with pytest.raises(ValueError, match=r"case1\.Options\.evaluation='distribute': use one of"):
        C1.fixed(evaluation="distribute")
    with pytest.raises(ValueError, match=r"preset 'halved': use one of 'broken', 'answer', 'fixed'"):
        C1.preset("halved")
    with pytest.raises(ValueError, match=r"preset 'broken': use one of 'posted', 'fixed'"):
        C2.preset("broken")
    with pytest.raises(TypeError):
        C1.fixed(no_such_option=1)


def test_presets_never_change_the_workload():
    for cls in CLASSES.values():
        workload = cls.fields_by_role()["workload"]
        for name in cls.PRESETS:
            assert not set(cls().diff(cls.preset(name))) & set(workload)


def test_diff_keeps_notebook_01s_rows_and_filters_by_role():
    assert list(C1.broken().diff(C1.answer()).items()) == [
        ("setup", ("posted", "answer")), ("log_ranks", ("all", "rank0")), ("num_workers", (4, 8)),
        ("loss_accum", ("tensor", "item")), ("find_unused_parameters", (True, False))]
    assert C1.broken().diff(C1.fixed(), role="measurement") == {"barrier_timing": (False, True)}
    assert C2().diff(C2.fixed(), role="workload") == {}
    with pytest.raises(ValueError, match="role 'fix'"):
        C1().diff(C1(), role="fix")


# -- roles -----------------------------------------------------------------------
@pytest.mark.parametrize("case", CLASSES)
def test_roles_cover_every_field_once(case):
    cls = CLASSES[case]
    by_role = cls.fields_by_role()
    assert by_role == ROLE_TABLE[case] and list(by_role) == list(ROLES)
    names = [f.name for f in dataclasses.fields(cls)]
    assert sorted(sum(by_role.values(), [])) == sorted(names)
    assert all(f.metadata["role"] in ROLES for f in dataclasses.fields(cls))


def test_option_refuses_unknown_roles_and_limits():
    with pytest.raises(ValueError, match="role 'fix'"):
        option(1, "fix")
    with pytest.raises(ValueError, match="max"):
        option(1, "switch", max=3)


# -- replace, assignment, pickling -------------------------------------------------
def test_replace_and_assignment_are_checked():
    o = C1.fixed()
    assert o.replace(batch="halved").batch == "halved" and o.batch == "scale_lr"
    with pytest.raises(ValueError, match=r"loss_accum='items'"):
        o.replace(loss_accum="items")
    with pytest.raises(ValueError, match=r"case2\.Options\.nvml='on'"):
        C2().replace(nvml="on")
    with pytest.raises(ValueError, match=r"setup='fixed'"):
        o.setup = "fixed"
    assert o.setup == "answer"
    with pytest.raises(AttributeError, match="no option 'btach'"):
        o.btach = "halved"


@pytest.mark.parametrize("o", [C1(), C1.fixed(comm_dtype="bf16", steps_limit=3), C2(), C2.fixed(val_batches=2)])
def test_options_survive_pickling_and_asdict(o):
    # Sent to spawned workers as is, and as dataclasses.asdict (train() rebuilds them).
    back = pickle.loads(pickle.dumps(o))
    assert back == o and type(back) is type(o)
    assert type(o)(**dataclasses.asdict(o)) == o


# -- --set NAME=VALUE ----------------------------------------------------------
@pytest.mark.parametrize("cls,text,want", [
    (C1, "find_unused_parameters=false", False), (C1, "amp=yes", True), (C1, "amp=1", True),
    (C1, "bucket_cap_mb=1.5", 1.5), (C1, "bucket_cap_mb=25", 25.0), (C1, "num_workers=cores", "cores"),
    (C1, "num_workers=3", 3), (C1, "steps_limit=none", None), (C1, "steps_limit=5", 5),
    (C1, "comm_dtype=bf16", "bf16"), (C1, "comm_dtype=None", None), (C1, "lr=1e-3", 1e-3),
    (C1, "wrap_when=device_count>1", "device_count>1"), (C1, "evaluation = none", "none"),
    (C2, "val_batches=3", 3), (C2, "val_batches=0.25", 0.25), (C2, "nvml=off", "off"),
    (C2, "log_every_step=false", False), (C2, "epochs=2", 2),
])
def test_overrides_are_typed_by_the_field(cls, text, want):
    name, value = (case1.parse_override if cls is C1 else cls.parse_override)(text)
    assert name == text.partition("=")[0].strip() and value == want and type(value) is type(want)


@pytest.mark.parametrize("cls,text,match", [
    (C1, "batch=halve", r"^case1\.Options\.batch='halve': use one of 'same', 'halved', 'scale_lr'$"),
    (C1, "num_workers=many", r"num_workers='many': use an int >= 0 or 'cores'$"),
    (C1, "amp=maybe", r"amp='maybe': use True or False$"),
    (C1, "batch_size=0", r"batch_size=0: use an int >= 1$"),
    (C1, "batch_size=eight", r"batch_size='eight': use an int >= 1$"),
    (C1, "evaluation=distribute", r"evaluation='distribute'"),
    (C2, "nvml=none", r"nvml='none': use one of 'step', 'off'$"),
    (C2, "val_batches=1.5", r"val_batches=1.5: use a float in \(0, 1\] or an int >= 1$"),
    (C1, "no_such_option=1", r"NAME=VALUE with NAME one of model, batch_size"),
    (C1, "batch", r"NAME=VALUE"),
])
def test_overrides_refuse_nonsense(cls, text, match):
    with pytest.raises(ValueError, match=match):
        cls.parse_override(text)


def test_the_command_line_refuses_a_bad_set_before_starting(capsys):
    parser, _ = cli.build_parser("case1")
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["case1", "--set", "loss_accum=items"])
    assert e.value.code == 2
    assert "argument --set: case1.Options.loss_accum='items': use one of" in capsys.readouterr().err
    args = parser.parse_args(["case1", "--set", "num_workers=0", "--set", "amp=true"])
    assert args.overrides == [("num_workers", 0), ("amp", True)]
