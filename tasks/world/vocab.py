"""Word lists the world draws values and colour from; plain data, no imports of ours."""

from __future__ import annotations

from typing import Any

OCCUPATIONS = (
    "cartographer", "botanist", "architect", "civil engineer", "chemist", "surveyor", "journalist",
    "lawyer", "economist", "physician", "geologist", "historian", "astronomer", "sculptor",
    "translator", "diplomat", "banker", "pharmacist", "mathematician", "linguist", "archivist",
    "shipwright", "glassblower", "clockmaker", "brewer", "aviator", "chef", "tailor",
    "veterinarian", "meteorologist", "stage actor", "violinist", "printer", "beekeeper",
)  # fmt: skip
INDUSTRIES = (
    "shipbuilding", "textile", "pharmaceutical", "software", "mining", "publishing", "railway",
    "brewing", "insurance", "aerospace", "glassmaking", "fishing", "telecommunications",
    "furniture", "agricultural machinery", "cosmetics", "shipping", "porcelain", "robotics",
    "timber", "optics", "confectionery",
)  # fmt: skip
WORK_KINDS: dict[str, dict[str, Any]] = {
    "novel": {"verb": "wrote", "made": "written", "released": "published", "genres": (
        "historical fiction", "crime", "science fiction", "satire", "family saga", "romance",
        "fantasy", "mystery", "gothic", "adventure", "coming-of-age", "epistolary")},
    "poetry collection": {"verb": "wrote", "made": "written", "released": "published", "genres": (
        "elegy", "pastoral", "lyric", "epic", "sonnet", "free verse", "prose poetry", "ballad")},
    "album": {"verb": "recorded", "made": "recorded", "released": "released", "genres": (
        "folk", "jazz", "ambient", "chamber pop", "blues", "electronic", "post-rock", "choral",
        "bluegrass", "synth-pop", "hip hop", "baroque pop")},
    "film": {"verb": "directed", "made": "directed", "released": "released", "genres": (
        "drama", "comedy", "thriller", "documentary", "western", "animated", "horror",
        "heist", "musical", "war", "road movie")},
    "photobook": {"verb": "photographed", "made": "photographed", "released": "published", "genres": (
        "landscape", "portrait", "street", "architectural", "wildlife", "documentary")},
}  # fmt: skip

MEETINGS = (
    "at a harvest dance", "through friends", "at university", "on a long train journey",
    "at a chess club", "while travelling abroad",
)  # fmt: skip
FLAVOUR_VALUES = {
    "month": ("January", "February", "March", "April", "May", "June", "July", "August",
              "September", "October", "November", "December"),
    "ordinal": ("eldest", "second", "third", "youngest"),
    "hobby": ("collected river stones", "kept bees", "sketched ships at the docks",
              "learned to sail", "played the viola", "built kites", "bred pigeons",
              "memorised old maps"),
    "trait_adj": ("quiet but stubborn", "restless", "unusually patient", "quick with numbers",
                  "fond of arguments"),
    "trait": ("meticulous notes", "a dry sense of humour", "long walks before work",
              "an unusual patience", "blunt letters"),
    "subject": ("law", "chemistry", "mathematics", "classics", "engineering", "economics",
                "geography", "medicine", "music"),
    "size": ("small", "mid-sized", "large", "busy", "quiet", "hilly"),
    "feature": ("covered markets", "stone bridges", "glass workshops", "spice trade",
                "botanical gardens", "canals", "lighthouse", "wine cellars"),
    "landmark": ("a ruined abbey", "a clock tower", "a salt market", "an old fortress"),
    "founders": ("fishermen", "traders", "monks", "river pilots", "miners"),
    "direction": ("north", "south", "east", "west"),
    "adjective": ("mountainous", "coastal", "landlocked", "densely forested", "arid"),
    "country_feature": ("terraced vineyards", "long winters", "folk music", "salt flats",
                        "island monasteries"),
    "colour": ("red", "blue", "green", "white", "black", "yellow", "grey"),
    "shape": ("star", "circle", "crescent", "cross", "triangle"),
    "product": ("cargo vessels", "measuring instruments", "printing presses", "ceramic tiles",
                "pumps", "reference books", "trading software"),
    "founder_did": ("ran it for many years", "later sold a stake", "stepped down in old age"),
    "faculty": ("law", "medicine", "engineering", "music", "agriculture", "philosophy"),
    "motto": ("Light through labour", "Patience and measure", "Ever forward",
              "Knowledge shared"),
    "reception": ("warm", "mixed", "glowing", "lukewarm", "divided"),
    "reception_did": ("divided its first critics", "sold slowly at first",
                      "gained a loyal following"),
}  # fmt: skip
