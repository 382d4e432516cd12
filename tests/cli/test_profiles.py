"""labeldp profiles: no match, unknown keys, columns."""

from labeldp.cli import main


def test_profiles_with_no_match_say_so_and_list_the_prefixes(capsys) -> None:
    assert main(["profiles", "first-day-nothing"]) == 2  # a prefix no profile has
    error = capsys.readouterr().err
    assert "no profile matches 'first-day-nothing'" in error and "digits/" in error and "movielens/" in error
    assert "--recipes" in error


def test_an_unknown_profile_points_to_recipes(capsys) -> None:
    assert main(["train", "--profile", "adult/e1/lp-1st/run0", "--out", "x"]) == 2
    error = capsys.readouterr().err
    assert "unknown profile 'adult/e1/lp-1st/run0'" in error and "--recipes" in error


def test_profiles_stay_in_columns_whatever_the_keys_length(tmp_path, capsys) -> None:
    recipes = tmp_path / "long_keys.py"
    recipes.write_text(
        "from labeldp.recipes import register\n"
        "from labeldp.runs import RunConfig\n"
        "register('firstday/a-rather-long-key-for-a-profile-of-ones-own/lp-1st/run0', "
        "RunConfig(method='lp-1st', epsilon=1.0))\n"
        "register('firstday/short/run0', RunConfig(method='lp-1st', epsilon=1.0))\n"
    )
    assert main(["profiles", "firstday/", "--recipes", str(recipes)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].index(" v1 ") == lines[1].index(" v1 ")
    assert lines[0].index("lp-1st  epsilon") == lines[1].index("lp-1st  epsilon")
