"""Which recipe a run's options came from, and so where its network came from: what a run's console
and its ``summary.json`` (``recipe``, ``recipe_source``, ``network_source``) name, in the same words.

``labeldp train`` takes the dataset's recipe for the method (:func:`dataset_recipe`: its own, one
borrowed from another dataset of its family, or none: the library's defaults) under the options typed,
or a registered profile as it is (``--profile``, :func:`profile_recipe`); a configuration handed to
:func:`~labeldp.runs.run.train_run` without one is taken as given (:data:`AS_GIVEN`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from labeldp.recipes.training import PRIOR_RECIPES, Recipe

if TYPE_CHECKING:
    from labeldp.recipes.profiles import Profile

#: the network's source where the configuration names none
RULE = "the rule's choice for these inputs"


@dataclass(frozen=True)
class AppliedRecipe:
    """The recipe a run's options came from.

    Attributes
    ----------
    name : str or None
        The recipe's name: ``<dataset>/<method>`` (``/<prior>-prior`` for a prior's own), the dataset
        being the one it was chosen on, or a profile's key; None where no recipe applied.
    source : str
        Where it came from, in words (the summary's ``recipe_source``, the console's recipe line).
    typed : tuple of str
        The options given over it (flags such as ``--epochs``, or a grid's option names).
    sets_model : bool
        Whether the run's network is the one the recipe names (not given over it).
    """

    name: str | None
    source: str
    typed: tuple[str, ...] = ()
    sets_model: bool = False

    @property
    def described(self) -> str:
        """The source, with the options given over the recipe: the summary's ``recipe_source``.

        Returns
        -------
        str
            ``source``, then ``; with your`` and the options, where some were given.
        """
        return self.source + (f"; with your {', '.join(self.typed)}" if self.typed else "")

    def console_line(self, settings: str = "") -> str:
        """The console's line, in the summary's words.

        Parameters
        ----------
        settings : str, optional
            The recipe's settings in a few words (:meth:`Recipe.describe`), shown after its source.

        Returns
        -------
        str
            ``recipe: NAME (SOURCE): SETTINGS; with your OPTIONS``.
        """
        given = f"; with your {', '.join(self.typed)}" if self.typed else ""
        return f"recipe: {self.name or 'none'} ({self.source}){': ' + settings if settings else ''}{given}"

    def with_typed(self, typed: Iterable[str]) -> AppliedRecipe:
        """This recipe with ``typed`` given over it (a network given is then not the recipe's).

        Parameters
        ----------
        typed : iterable of str
            The options given over it.

        Returns
        -------
        AppliedRecipe
            A copy, ``typed`` sorted.
        """
        typed = tuple(sorted(typed))
        model = {"--model", "model"} & set(typed)
        return replace(self, typed=typed, sets_model=self.sets_model and not model)

    def network_source(self, model: str | None) -> str:
        """Where the network of a run that takes this recipe came from: the rule's choice where the
        configuration names none (``model`` None), else the recipe's, or the one given.

        Parameters
        ----------
        model : str or None
            The configuration's ``model``.

        Returns
        -------
        str
            The summary's ``network_source``, as the console prints it.
        """
        if model is None:
            return RULE
        if self.sets_model:
            return f"the recipe's ({self.name})"
        given = [name for name in self.typed if name in ("--model", "model")]
        return f"your {given[0]}" if given else "as configured"


#: a configuration handed to train_run without a recipe: taken as given
AS_GIVEN = AppliedRecipe(None, "none: the configuration as given")


def dataset_recipe(
    dataset: str, method: str, prior: str | None, recipe: Recipe | None, typed: Iterable[str] = ()
) -> AppliedRecipe:
    """The recipe ``labeldp train`` applies (:func:`~labeldp.recipes.training.recipe_for`'s), named.

    Parameters
    ----------
    dataset, method : str
        The run's dataset and method.
    prior : str or None
        The run's stage-1 prior (a prior's own recipe where one exists).
    recipe : Recipe or None
        The recipe applied; None: the library's defaults.
    typed : iterable of str, optional
        The flags typed over it.

    Returns
    -------
    AppliedRecipe
        Named ``<dataset>/<method>`` (the dataset it was chosen on), its source: the dataset's own,
        borrowed from its family, or none.
    """
    if recipe is None:
        return AppliedRecipe(None, f"no tuned recipe for {method} on {dataset}: the library's defaults").with_typed(
            typed
        )
    chosen_on = recipe.borrowed_from or dataset
    name = f"{chosen_on}/{method}" + (f"/{prior}-prior" if (dataset, method, prior) in PRIOR_RECIPES else "")
    how = f", {recipe.source}" if recipe.source else ""
    if recipe.borrowed_from:
        source = f"{recipe.borrowed_from}'s, borrowed: {dataset} has none of its own{how}"
    else:
        source = f"the dataset's own{how}"
    return AppliedRecipe(name, source, sets_model=recipe.model is not None).with_typed(typed)


def profile_recipe(profile: Profile, base: bool = False) -> AppliedRecipe:
    """A registered profile run as it is (``--profile``, a sweep's ``--profiles``, the demo's), or the
    base of a sweep's grid (``--base``).

    Parameters
    ----------
    profile : Profile
        The profile.
    base : bool, optional
        Whether it is a grid's base (default False: run as registered).

    Returns
    -------
    AppliedRecipe
        Named by the profile's key.
    """
    how = "the base of the grid" if base else "run as registered"
    return AppliedRecipe(
        profile.key,
        f"a registered profile, version {profile.version}, {how}",
        sets_model=profile.config.model is not None,
    )


__all__ = ["AS_GIVEN", "RULE", "AppliedRecipe", "dataset_recipe", "profile_recipe"]
