"""Each command-line option is declared once (labeldp.options.Option): every command's flag of it comes from
that declaration, no flag's help or default is written anywhere else, the docs' option tables name declared
flags, and a method's own options reach it."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from labeldp.cli import COMMANDS, build_parser, main
from labeldp.config.shared_options import EPSILON, PRIVACY_UNIT

ROOT = Path(__file__).resolve().parents[2]
#: the flags argparse adds itself
OWN_FLAGS = {"-h", "--help", "--version"}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by name, ``hashed``'s actions as ``hashed train`` and ``hashed predict``."""
    found = {}
    for command in COMMANDS:
        parser = build_parser(command)._subparsers._group_actions[0].choices[command]
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        found.update({f"{command} {name}": sub for a in actions for name, sub in a.choices.items()})
        found[command] = parser
    return found


def _flags() -> dict[tuple[str, str], argparse.Action]:
    """Every flag of every command: (command, flag) -> its action."""
    return {
        (command, flag): action
        for command, parser in _parsers().items()
        for action in parser._actions
        for flag in action.option_strings
        if flag not in OWN_FLAGS
    }


def test_a_flag_of_several_commands_comes_from_one_declaration() -> None:
    by_flag: dict[str, set[int]] = {}
    for (command, flag), action in _flags().items():
        assert hasattr(action, "declaration"), f"labeldp {command} {flag} is not built from a declaration"
        by_flag.setdefault(flag, set()).add(id(action.declaration))
    assert {flag for flag, declarations in by_flag.items() if len(declarations) > 1} == set()
    flags = [flag for (_, flag) in _flags()]
    shared = {flag for flag in flags if flags.count(flag) > 1}
    assert {"--epsilon", "--privacy-unit", "--secure-rng", "--out", "--label-column", "--table"} <= shared


def test_train_and_privatize_take_the_words_of_one_declaration() -> None:
    flags = _flags()
    for declaration, flag in ((EPSILON, "--epsilon"), (PRIVACY_UNIT, "--privacy-unit")):
        train, privatize = flags["train", flag], flags["privatize", flag]
        assert train.declaration is privatize.declaration is declaration
        assert train.help.startswith(declaration.help) and privatize.help.startswith(declaration.help)
        # what each adds of its own is kept in the declaration too
        for command, action in (("train", train), ("privatize", privatize)):
            assert declaration.commands[command]["help"] in action.help


def _written_flags(path: Path) -> list[str]:
    """The ``add_argument("--flag", ..., help=... or default=...)`` calls of a module: a flag stated by hand."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args:
            first = node.args[0]
            stated = {keyword.arg for keyword in node.keywords} & {"help", "default"}
            if isinstance(first, ast.Constant) and str(first.value).startswith("--") and stated:
                found.append(f"{path}: {first.value}")
    return found


def test_no_flag_is_stated_outside_its_declaration() -> None:
    written = [flag for path in sorted((ROOT / "src" / "labeldp").rglob("*.py")) for flag in _written_flags(path)]
    assert written == []


def test_a_flag_stated_by_hand_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('parser.add_argument("--epsilon", type=float, help="budget")\nparser.add_argument("run_dir")\n')
    assert _written_flags(planted) == [f"{planted}: --epsilon"]


@pytest.mark.parametrize("page", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")))
def test_the_docs_option_tables_name_declared_flags_and_their_defaults(page: str) -> None:
    flags = _flags()
    declared = {flag for (_, flag) in flags}
    for row in re.findall(r"^\| `--.*$", (ROOT / page).read_text(), re.M):
        named = re.findall(r"--[a-z][a-z0-9-]*", row.split("|")[1])
        assert set(named) <= declared, f"{page}: {row[:60]}... names no declared flag {set(named) - declared}"
        stated = re.search(r"\(default:? `?(\d[\d.e-]*)", row)
        default = next((a.declaration.on(None).default for (_, f), a in flags.items() if f == named[0]), None)
        if len(named) == 1 and stated and isinstance(default, (int, float)) and not isinstance(default, bool):
            assert float(stated.group(1)) == default, f"{page}: {named[0]}'s default is {default}, not {stated[1]}"


def test_a_method_declares_options_of_its_own(monkeypatch, capsys) -> None:
    """A method of one's own brings its options as a frozen dataclass: its flags, overrides and grid names come
    from it, config.json records them beside the shared settings, and another method refuses them."""
    import dataclasses

    from labeldp.cli.common import config_with_recipe
    from labeldp.config import method_registry as registry
    from labeldp.config.overrides import apply_overrides, parse_assignments
    from labeldp.config.run_config import RunConfig
    from labeldp.errors import ConfigError
    from labeldp.options import option

    @dataclasses.dataclass(frozen=True)
    class Toy:
        share: float = option(1.0, help="the share of the rows trained on")

    lp1st = registry.get_method("lp-1st")
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_method(registry.Method("toy", "a toy", lp1st.run, options=Toy))
    parser = build_parser("train")
    args = parser.parse_args(["train", "--method", "toy", "--epsilon", "1", "--share", "0.5", "--quiet", "--out", "x"])
    config = config_with_recipe(args)
    assert config.options == Toy(share=0.5) and config.resolved().options == Toy(share=0.5)
    assert RunConfig(method="toy", epsilon=1.0).resolved().options == Toy()  # its default
    assert config.to_dict()["share"] == 0.5 and RunConfig.from_dict(config.to_dict()) == config
    assert apply_overrides(config, {"share": "0.25"}).options == Toy(share=0.25)
    assert parse_assignments(["share=0.1,0.2"]) == {"share": ["0.1", "0.2"]}
    with pytest.raises(ConfigError, match="'lp-1st' does not use share"):
        RunConfig(method="lp-1st", epsilon=1.0, options={"share": 0.5})
    with pytest.raises(ConfigError, match="'toy' has no option turbo; its own are share"):
        RunConfig(method="toy", epsilon=1.0, options={"turbo": True})


def test_no_recipe_sets_the_datasets_recipes_aside(capsys) -> None:
    """``--no-recipe`` on the digits (a recipe of their own): the library's defaults, said and recorded, and
    the learning rate chosen on the run's own release, named as the library's defaults; ``labeldp tune``
    takes it too, ``--profile`` refuses it."""
    from labeldp.cli.common import config_and_recipe
    from labeldp.cli.train import tune_budget
    from labeldp.config.run_config import RunConfig
    from labeldp.config.tuning import DEFAULT_TUNE_BUDGET
    from labeldp.experiments import auto_tune

    def parsed(command: str, *more: str):
        argv = [command, "--dataset", "digits", "--method", "lp-2st", "--epsilon", "1", "--out", "o", *more]
        args = build_parser(command).parse_args(argv)
        config, recipe = config_and_recipe(args)
        return args, config, recipe

    args, config, recipe = parsed("train", "--no-recipe")
    assert config.train == RunConfig().train and config.model is None
    assert recipe.name is None and "--no-recipe" in recipe.source and "--no-recipe" in capsys.readouterr().out
    assert tune_budget(args, config) == DEFAULT_TUNE_BUDGET
    args, config, _ = parsed("train")
    assert config.train != RunConfig().train and tune_budget(args, config) == 0.0  # the digits' own recipe
    assert parsed("tune", "--no-recipe", "--grid", "lr=0.1,0.2")[1].train == RunConfig().train

    _, config, recipe = parsed("train", "--no-recipe", "--quiet")
    assert auto_tune._base_name(recipe) == "the library's defaults"
    assert main(["train", "--profile", "digits/e1/lp-1st/run0", "--no-recipe", "--out", "o"]) != 0
    assert "--no-recipe would not apply to it" in capsys.readouterr().err
