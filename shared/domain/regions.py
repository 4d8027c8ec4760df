"""Azure regions by their display names, which is how the real service answered a location.

A collection's location is sent either as a region's name (`westus`, what `az` and templates
write) or as its display name (`West US`, what the .NET SDK's tests sent); the service answered
the display name both times. A location that is no known region is kept as sent: new regions
keep appearing, and the location is only a label here (docs/behaviour.md#collections).
"""

from __future__ import annotations

_DISPLAY_NAMES = (
    "Australia Central", "Australia Central 2", "Australia East", "Australia Southeast",
    "Austria East", "Belgium Central", "Brazil South", "Brazil Southeast", "Canada Central",
    "Canada East", "Central India", "Central US", "Chile Central", "China East", "China East 2",
    "China East 3", "China North", "China North 2", "China North 3", "East Asia", "East US",
    "East US 2", "France Central", "France South", "Germany North", "Germany West Central",
    "Indonesia Central", "Israel Central", "Italy North", "Japan East", "Japan West",
    "Korea Central", "Korea South", "Malaysia West", "Mexico Central", "New Zealand North",
    "North Central US", "North Europe", "Norway East", "Norway West", "Poland Central",
    "Qatar Central", "South Africa North", "South Africa West", "South Central US",
    "South India", "Southeast Asia", "Spain Central", "Sweden Central", "Switzerland North",
    "Switzerland West", "UAE Central", "UAE North", "UK South", "UK West", "USGov Arizona",
    "USGov Texas", "USGov Virginia", "West Central US", "West Europe", "West India", "West US",
    "West US 2", "West US 3",
)  # fmt: skip
_BY_FOLDED_NAME = {name.replace(" ", "").casefold(): name for name in _DISPLAY_NAMES}


def display_name(location: str | None) -> str | None:
    """`westus`, `WestUS` or `West US` as `West US`; an unknown location unchanged."""
    if location is None:
        return None
    return _BY_FOLDED_NAME.get(location.replace(" ", "").casefold(), location)
