"""Recipes: the best known training settings of each method on each dataset
(:mod:`labeldp.recipes.training`, read first), and the named, versioned runs built from them
(:mod:`labeldp.recipes.profiles`).
"""

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
