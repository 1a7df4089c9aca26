"""Sentence templates for the world's passages: data only, rendered by `passages`.

Fields: ``{N}`` the subject's name; ``{S}``/``{s}``, ``{P}``/``{p}``, ``{O}`` pronouns (subject,
possessive, object; one sentence per passage gets the name instead of ``{S}``/``{s}``); fact fields
(``{year}``, ``{city}``, ...); flavour fields drawn at random; ``{X}`` and ``{X_...}`` another
entity and its facts. A template whose fields are not all available is skipped.

Person passages keep their searchable words apart: "born" and "married" appear only in early
life, "career", "employer" and "studied" only in career, so a query names the section it needs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SectionTemplates:
    """How one passage of one entity kind is written."""

    openings: tuple[tuple[tuple[str, ...], str], ...]  # (facts stated, template naming {N})
    facts: dict[str, tuple[str, ...]]  # fact -> templates stating it alone
    flavour: tuple[str, ...]  # never-asked colour
    distractors: tuple[tuple[str | None, str, str], ...]  # (fact of X stated, X's kind, template)


PERSON_EARLY = SectionTemplates(
    openings=(
        (("birth_year", "birthplace"), "{N} was born in {city} in {year}."),
        (("birth_year", "birthplace"), "{N} was born in {year} in the city of {city}."),
        (("birth_year", "birthplace"), "Born in {city} in {year}, {N} was the {ordinal} of {kids} children."),
        (("birth_year", "birthplace"), "{N} was born on {day} {month} {year} in {city}."),
        (("birth_year",), "{N} was born in {year}, the {ordinal} of {kids} children."),
        ((), "{N} grew up in a household of {parent_occ}s."),
    ),
    facts={
        "birth_year": ("{S} was born in {year}.", "{S} was born in the winter of {year}."),
        "birthplace": (
            "The family lived in {city}, where {s} was born.",
            "{S} was born in {city} and spent {p} youth there.",
        ),
        "spouse": (
            "In {married}, {s} married {spouse}.",
            "{S} married {spouse} in {married}; the couple had {children} children.",
            "{S} married {spouse}, whom {s} had met {met}.",
            "{spouse} and {N} were married in {married}.",
        ),
    },
    flavour=(
        "{P} father was {a_parent_occ} and {p} mother {a_parent_occ2}.",
        "As a child {s} {hobby}.",
        "Teachers remembered {O} as {trait_adj}.",
        "{S} attended the village school and spent summers in {elsewhere}.",
        "{S} was raised mostly by {p} grandmother.",
        "Family letters describe a cramped house near the {river} river.",
        "{S} spent much of {p} youth reading in the town library.",
    ),
    distractors=(
        ("occupation", "person", "{P} childhood friend {X}, later {X_a_occ}, lived on the same street."),
        (None, "person", "{S} was a distant cousin of {X}."),
        (None, "city", "The family moved briefly to {X} before returning."),
    ),
)

PERSON_CAREER = SectionTemplates(
    openings=(
        (("occupation",), "{N} built a long career as {a_occ}."),
        (("occupation",), "By profession {N} was {a_occ}, a career that lasted {decades} decades."),
        (
            ("occupation", "employer"),
            "{N} spent most of {p} career as {a_occ} at {org}, {p} employer for {span} years.",
        ),
        (("alma_mater",), "{N} studied {subject} at {uni}."),
        ((), "{N} spent most of {p} working life away from home."),
    ),
    facts={
        "occupation": (
            "{S} made a career as {a_occ}.",
            "{P} career as {a_occ} spanned {decades} decades.",
            "{S} worked as {a_occ} throughout {p} career.",
        ),
        "employer": (
            "{P} employer for {span} years was {org}.",
            "{S} joined {org} in {joined}, and it remained {p} employer until {left}.",
            "{org} was {p} longest employer.",
            "At {org}, {p} employer from {joined}, {s} rose to a senior post.",
        ),
        "alma_mater": (
            "{S} studied {subject} at {uni}.",
            "{S} studied at {uni}, graduating in {graduated}.",
            "After school {s} studied at {uni}.",
        ),
    },
    flavour=(
        "Colleagues knew {O} for {trait}.",
        "{S} received the {prize} Prize in {prized}.",
        "{S} retired in {retired} and wrote a short memoir.",
        "{S} kept detailed notebooks, now held in a private archive.",
        "{P} working methods were later taught to apprentices.",
        "In later years {s} gave public lectures on {subject}.",
    ),
    distractors=(
        ("occupation", "person", "{S} worked alongside {X}, {X_a_occ}."),
        (None, "person", "{S} often corresponded with {X}."),
        ("industry", "organisation", "{S} once advised {X}, {X_a_ind} firm."),
    ),
)

CITY = SectionTemplates(
    openings=(
        (("country",), "{N} is a city in the country of {country}."),
        (("country",), "{N} is a {size} city in the country of {country}."),
        (("country",), "Located in the country of {country}, {N} is known for its {feature}."),
        (("country", "founding_year"), "{N} is a city in the country of {country}, founded in {fy}."),
        ((), "{N} is a {size} city on the {river} river."),
    ),
    facts={
        "country": (
            "{S} lies in the country of {country}.",
            "The city belongs to the country of {country}.",
            "{S} is part of the country of {country}.",
        ),
        "founding_year": (
            "{S} was founded in {fy}.",
            "The city was founded in {fy} by {founders}.",
            "Records show that {s} was founded in {fy}.",
        ),
        "mayor": (
            "{P} mayor is {mayor}.",
            "{mayor} serves as mayor of {N}.",
            "The current mayor of the city is {mayor}.",
        ),
        "population": (
            "{S} has a population of about {pop}.",
            "{S} has a population of roughly {pop}.",
            "At the last census the population of {N} was {pop}.",
        ),
    },
    flavour=(
        "The {river} river runs through the city.",
        "{S} is known for its {feature}.",
        "Its old town is built around {landmark}.",
        "The local football club plays in {colour} shirts.",
        "A weekly market has been held in the main square for centuries.",
        "{S} is linked to the coast by an old canal and a newer road.",
    ),
    distractors=(
        ("founding_year", "city", "{S} is twinned with {X}, a city founded in {X_fy}."),
        ("population", "city", "{X}, a city of about {X_pop} people, lies {direction} of {N}."),
        (None, "city", "Trains run daily to {X}."),
    ),
)

COUNTRY = SectionTemplates(
    openings=(
        (("continent",), "{N} is a country on the continent of {continent}."),
        (("continent",), "{N} is a {adjective} nation on the continent of {continent}."),
        (
            ("continent", "capital"),
            "{N} is a country on the continent of {continent}, and its capital is {capital}.",
        ),
        ((), "{N} is a {adjective} country with {provinces} provinces."),
    ),
    facts={
        "capital": (
            "{P} capital is {capital}.",
            "The capital and seat of government is {capital}.",
            "{capital} serves as the capital of {N}.",
        ),
        "currency": (
            "The currency of {N} is the {currency}.",
            "{S} uses the {currency} as its currency.",
            "Prices are quoted in {currency}s, the national currency.",
        ),
        "continent": (
            "{S} lies on the continent of {continent}.",
            "The country is part of the continent of {continent}.",
        ),
    },
    flavour=(
        "The official language is {language}.",
        "{S} is known for its {country_feature}.",
        "{P} flag is {colour} with a {shape}.",
        "{S} is divided into {provinces} provinces.",
        "Its national holiday falls in {month}.",
    ),
    distractors=(
        ("currency", "country", "{S} borders {X}, whose currency is the {X_currency}."),
        (None, "country", "{S} shares a long border with {X}."),
        ("continent", "country", "Many of its traders deal with {X}, a country in {X_continent}."),
    ),
)

ORGANISATION = SectionTemplates(
    openings=(
        (("industry", "founding_year"), "{N} is a company in the {ind} industry, founded in {fy}."),
        (("industry",), "{N} is a company in the {ind} industry."),
        (("founding_year",), "Founded in {fy}, {N} is a privately held company."),
        (("founder", "founding_year"), "{N} was founded in {fy} by its founder, {founder}."),
    ),
    facts={
        "founder": (
            "Its founder was {founder}.",
            "{founder}, the founder of {N}, {founder_did}.",
            "The company was set up by its founder, {founder}.",
        ),
        "founding_year": ("{S} was founded in {fy}.", "The company was founded in {fy}."),
        "headquarters": (
            "Its headquarters are in {hq}.",
            "{S} has its headquarters in {hq}.",
            "The company keeps its headquarters in {hq}.",
        ),
        "industry": ("{S} works in the {ind} industry.", "The company is active in the {ind} industry."),
    },
    flavour=(
        "It employs about {staff} people.",
        "{S} is best known for its {product}.",
        "Its logo is a {colour} {shape}.",
        "{S} has offices in {n_offices} cities.",
        "The company publishes an annual report each {month}.",
    ),
    distractors=(
        ("headquarters", "organisation", "Its main rival is {X}, which is based in {X_hq}."),
        (None, "organisation", "{S} once bought a stake in {X}."),
        ("industry", "organisation", "{S} supplies {X}, {X_a_ind} firm."),
    ),
)

UNIVERSITY = SectionTemplates(
    openings=(
        (("campus",), "{N} is a university with its main campus in {campus}."),
        (("founding_year",), "{N} is a public university founded in {fy}."),
        (("campus", "founding_year"), "Founded in {fy}, {N} is a university whose campus lies in {campus}."),
    ),
    facts={
        "campus": (
            "Its campus is in {campus}.",
            "The university's main campus lies in {campus}.",
            "{S} has its campus in {campus}.",
        ),
        "founding_year": ("{S} was founded in {fy}.", "The university was founded in {fy}."),
        "president": (
            "Its president is {president}.",
            "{president} serves as president of the university.",
            "The university is led by its president, {president}.",
        ),
    },
    flavour=(
        "It enrols about {students} students.",
        "Its motto is '{motto}'.",
        "The library holds some {volumes} volumes.",
        "{S} is known for its {faculty} faculty.",
        "Its graduation ceremony takes place every {month}.",
    ),
    distractors=(
        ("founding_year", "university", "{S} has an exchange programme with {X}, founded in {X_fy}."),
        (None, "university", "{S} competes in rowing against {X}."),
    ),
)

WORK = SectionTemplates(
    openings=(
        (("year", "creator"), "{N} is a {kind} {made} by {creator} and {released} in {year}."),
        (("genre", "creator"), "{N} is a {kind} in the {genre} genre, {made} by {creator}."),
        (("year",), "{N} is a {kind} first {released} in {year}."),
        ((), "{N} is a {kind} that {reception_did}."),
    ),
    facts={
        "creator": (
            "It was {made} by {creator}.",
            "The {kind} was {made} by {creator}.",
            "{S} was {made} by {creator} over {effort} years.",
        ),
        "publisher": (
            "It was {released} by {publisher}.",
            "The {kind} was {released} by {publisher}.",
            "{publisher} {released} the {kind}.",
        ),
        "year": ("It was first {released} in {year}.", "The {kind} was {released} in {year}."),
        "genre": ("Critics place it in the {genre} genre.", "Its genre is usually given as {genre}."),
    },
    flavour=(
        "It received {reception} reviews on release.",
        "{length}",
        "A revised edition followed {effort} years later.",
        "{S} has been translated into {n_languages} languages.",
        "A short essay on the {kind} appeared in a literary quarterly.",
    ),
    distractors=(
        ("genre", "work", "It is often compared with {X}, {X_a_genre} {X_kind}."),
        (None, "work", "Critics often mention it alongside {X}."),
    ),
)

SECTIONS = {
    ("person", "early life"): PERSON_EARLY, ("person", "career"): PERSON_CAREER,
    ("city", ""): CITY, ("country", ""): COUNTRY, ("organisation", ""): ORGANISATION,
    ("university", ""): UNIVERSITY, ("work", ""): WORK,
}  # fmt: skip

# "Not to be confused with {X}{description}" for a look-alike of each kind: (fact stated, text).
HATNOTE_DESCRIPTIONS = {
    "person": (("occupation", ", {X_a_occ}"), ("birth_year", ", born in {X_year}"), (None, "")),
    "city": (("country", ", a city in {X_country}"), ("founding_year", ", founded in {X_fy}"),
             (None, ", another city")),
    "country": (("continent", ", a country in {X_continent}"), (None, "")),
    "organisation": (("industry", ", {X_a_ind} company"), ("headquarters", ", based in {X_hq}"),
                     (None, "")),
    "university": (("founding_year", ", founded in {X_fy}"), ("campus", ", in {X_campus}"),
                   (None, "")),
    "work": (("year", ", a {X_year} {X_kind}"), ("genre", ", {X_a_genre} {X_kind}"), (None, "")),
}  # fmt: skip
HATNOTES = (
    "Not to be confused with {X}{X_description}.",
    "{N} should not be confused with {X}{X_description}.",
    "For the similarly named {X}{X_description}, see its own entry.",
)
