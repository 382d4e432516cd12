"""Recipes: the best known training settings of each method on each dataset
(:mod:`labeldp.recipes.training`, read first), and the named, versioned runs built from them
(:mod:`labeldp.recipes.profile_registry`).
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.recipes.applied import AppliedRecipe as AppliedRecipe
    from labeldp.recipes.profile_registry import Profile as Profile
    from labeldp.recipes.profile_registry import get_profile as get_profile
    from labeldp.recipes.profile_registry import list_profiles as list_profiles
    from labeldp.recipes.profile_registry import load_recipes as load_recipes
    from labeldp.recipes.profile_registry import loaded_recipes as loaded_recipes
    from labeldp.recipes.profile_registry import register as register
    from labeldp.recipes.training import Recipe as Recipe
    from labeldp.recipes.training import recipe_for as recipe_for
    from labeldp.recipes.training import with_recipe as with_recipe

__getattr__, __dir__, __all__ = lazy_exports(__name__)
