"""labeldp demo: a fresh folder per demo, the seeds' mean and spread."""

from labeldp.cli import main
from labeldp.config.train_config import TrainConfig


def test_each_demo_draws_afresh_into_a_new_folder_it_names(tmp_path, monkeypatch, capsys) -> None:
    import dataclasses

    from labeldp.cli import demo
    from labeldp.recipes import profile_registry

    def shortened(profile):  # two epochs: the demo's machinery, not its accuracy
        return dataclasses.replace(profile, config=dataclasses.replace(profile.config, train=TrainConfig(epochs=2)))

    listed = profile_registry.list_profiles
    monkeypatch.setattr(profile_registry, "list_profiles", lambda pattern=None: [shortened(p) for p in listed(pattern)])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "DEMO_PROFILES", r"^digits/e8/lp-1st/run[0-1]$")
    folders = []
    for _ in range(2):
        assert main(["demo"]) == 0
        out = capsys.readouterr().out
        folder = out.splitlines()[0].removeprefix("demo runs in ").rstrip("/")
        assert (tmp_path / folder / "digits__e8__lp-1st__run0" / "summary.json").exists()
        assert f"runs: {folder}/" in out and " ± " in out and "(2)" in out  # mean ± std over the seeds
        folders.append(folder)
    assert folders[0] != folders[1]
    assert main(["budget"]) == 0  # the user's budget folder: the demo keeps its own
    assert "no dataset has spent anything yet" in capsys.readouterr().out
    assert (tmp_path / folders[0] / "budget").is_dir()
