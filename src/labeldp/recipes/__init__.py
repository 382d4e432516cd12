"""Recipes in one place: the best known training settings of each method on each dataset
(:mod:`~labeldp.recipes.training`, what ``labeldp train`` uses for the options a user does not give),
and named, versioned runs built from them, the profiles (:mod:`~labeldp.recipes.profiles`, labeldp's
own in :mod:`~labeldp.recipes.builtin`), and which of them a run took (:mod:`~labeldp.recipes.applied`,
named in its summary)."""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "AppliedRecipe": "labeldp.recipes.applied",
        "Profile": "labeldp.recipes.profiles",
        "Recipe": "labeldp.recipes.training",
        "get_profile": "labeldp.recipes.profiles",
        "list_profiles": "labeldp.recipes.profiles",
        "load_recipes": "labeldp.recipes.profiles",
        "loaded_recipes": "labeldp.recipes.profiles",
        "recipe_for": "labeldp.recipes.training",
        "register": "labeldp.recipes.profiles",
        "with_recipe": "labeldp.recipes.training",
    },
)
