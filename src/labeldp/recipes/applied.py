"""Which recipe a run's options came from, and so where its network came from, in the words its console and
``summary.json`` (``recipe``, ``recipe_source``, ``network_source``) share.

``labeldp train`` takes the dataset's recipe for the method (:func:`dataset_recipe`) under the options typed,
or a registered profile as it is (:func:`profile_recipe`); a configuration handed to
:func:`~labeldp.runs.run.train_run` without one is taken as given (:data:`AS_GIVEN`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from labeldp.recipes.training import PRIOR_RECIPES, Recipe

if TYPE_CHECKING:
    from labeldp.recipes.profile_registry import Profile

#: the network's source where the configuration names none
RULE = "the rule's choice for these inputs"


@dataclass(frozen=True)
class AppliedRecipe:
    """The recipe a run's options came from.

    Attributes
    ----------
    name : str or None
        ``<dataset>/<method>`` (``/<prior>-prior`` for a prior's own), the dataset being the one it was
        chosen on, or a profile's key; None where no recipe applied.
    source : str
        Where it came from, in words (the summary's ``recipe_source``).
    typed : tuple of str
        The options given over it (flags such as ``--epochs``, or a grid's option names).
    sets_model : bool
        Whether the run's network is the one the recipe names.
    model_chosen : bool
        Whether the run's network was chosen on its own release (the auto-tune's trees).
    """

    name: str | None
    source: str
    typed: tuple[str, ...] = ()
    sets_model: bool = False
    model_chosen: bool = False

    @property
    def described(self) -> str:
        """``source`` with the options given over the recipe: the summary's ``recipe_source``."""
        return self.source + (f"; with your {', '.join(self.typed)}" if self.typed else "")

    def console_line(self, settings: str = "") -> str:
        """``recipe: NAME (SOURCE): SETTINGS; with your OPTIONS``, ``settings`` being :meth:`Recipe.describe`'s."""
        given = f"; with your {', '.join(self.typed)}" if self.typed else ""
        return f"recipe: {self.name or 'none'} ({self.source}){': ' + settings if settings else ''}{given}"

    def with_typed(self, typed: Iterable[str]) -> AppliedRecipe:
        """This recipe with ``typed`` given over it (a network given is then not the recipe's)."""
        typed = tuple(sorted(typed))
        model = {"--model", "model"} & set(typed)
        return replace(self, typed=typed, sets_model=self.sets_model and not model)

    def network_source(self, model: str | None) -> str:
        """Where a run's network came from (the summary's ``network_source``): the rule's choice where
        ``model`` is None, else the recipe's, or the one given."""
        if model is None:
            return RULE
        if self.model_chosen:
            return "chosen on the run's release"
        if self.sets_model:
            return f"the recipe's ({self.name})"
        given = [name for name in self.typed if name in ("--model", "model")]
        return f"your {given[0]}" if given else "as configured"


#: a configuration handed to train_run without a recipe: taken as given
AS_GIVEN = AppliedRecipe(None, "none: the configuration as given")


def dataset_recipe(
    dataset: str,
    method: str,
    prior: str | None,
    recipe: Recipe | None,
    typed: Iterable[str] = (),
    *,
    ignored: bool = False,
) -> AppliedRecipe:
    """The recipe ``labeldp train`` applies (``recipe``, :func:`~labeldp.recipes.training.recipe_for`'s; None:
    the library's defaults, ``ignored`` where ``--no-recipe`` set the dataset's aside), named after the dataset
    it was chosen on, its source the dataset's own, borrowed from its family, or none."""
    if ignored:
        return AppliedRecipe(None, "the dataset's set aside by --no-recipe: the library's defaults").with_typed(typed)
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
    """A registered profile run as it is (``--profile``, ``--profiles``, the demo's), or a grid's ``base``
    (``--base``)."""
    how = "the base of the grid" if base else "run as registered"
    return AppliedRecipe(
        profile.key,
        f"a registered profile, version {profile.version}, {how}",
        sets_model=profile.config.model is not None,
    )


__all__ = ["AS_GIVEN", "RULE", "AppliedRecipe", "dataset_recipe", "profile_recipe"]
