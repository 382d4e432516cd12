"""Recipes: the best known training settings of each method on each dataset
(:mod:`labeldp.recipes.training`, read first), and the named, versioned runs built from them
(:mod:`labeldp.recipes.profile_registry`).
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "AppliedRecipe": "labeldp.recipes.applied",
        "Profile": "labeldp.recipes.profile_registry",
        "Recipe": "labeldp.recipes.training",
        "get_profile": "labeldp.recipes.profile_registry",
        "list_profiles": "labeldp.recipes.profile_registry",
        "load_recipes": "labeldp.recipes.profile_registry",
        "loaded_recipes": "labeldp.recipes.profile_registry",
        "recipe_for": "labeldp.recipes.training",
        "register": "labeldp.recipes.profile_registry",
        "with_recipe": "labeldp.recipes.training",
    },
)
