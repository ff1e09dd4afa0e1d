"""The scientific domains of the datasci world: one schema each, shared by every question template.

Each domain has a messy *main* CSV (one row per record, with an id, a join key, a date, a category, a measured value
and its unit) and a *lookup* file (CSV or JSON, keyed by the join key) that holds the grouping attribute. Templates
are written once against this schema, so the same sub-procedures (cleaning, unit conversion, date parsing, joining,
aggregating) recur in every domain.
"""

from __future__ import annotations

from dataclasses import dataclass

MISSING_TOKENS = ("", "NA", "n/a", "-")
"""How a missing value is written in the value column."""
DATE_FORMATS = ("%Y-%m-%d", "%Y-%m-%d", "%m/%d/%Y", "%d %b %Y", "%B %d, %Y", "%Y%m%d")
"""strftime formats of the date column, drawn uniformly per row (ISO twice as often)."""
DATE_FORMAT_DOCS: dict[str, str] = {
    "%Y-%m-%d": "`YYYY-MM-DD` (`2023-04-05`)",
    "%m/%d/%Y": "`MM/DD/YYYY`, month first (`04/05/2023` is 5 April 2023)",
    "%d %b %Y": "`DD Mon YYYY` (`05 Apr 2023`)",
    "%B %d, %Y": "`Month DD, YYYY` (`April 05, 2023`)",
    "%Y%m%d": "`YYYYMMDD` (`20230405`)",
}
"""How the domain READMEs write each date format (month names in English)."""


@dataclass(frozen=True)
class DomainSpec:
    """The schema and generation settings of one domain."""

    name: str
    """Folder name under ``data/``."""
    title: str
    noun: str
    """What one record is, singular ("reading")."""
    nouns: str
    main_file: str
    id_col: str
    id_prefix: str
    key_col: str
    """Join key column in the main file."""
    key_prefix: str
    date_col: str
    cat_col: str
    categories: tuple[str, ...]
    """Canonical category names (the main file spells them with random casing/whitespace)."""
    cat_label: str
    """How questions name the category ("pollutant")."""
    value_col: str
    unit_col: str
    measure: str
    """What the value measures ("concentration")."""
    canonical_unit: str
    units: tuple[tuple[str, float], ...]
    """Unit spellings found in the data and their factor to the canonical unit."""
    value_range: tuple[float, float]
    """Log-uniform range of canonical values."""
    decimals: int
    """Decimals printed for values in the canonical unit (other units get more or fewer)."""
    lookup_file: str
    lookup_key: str
    """Join key field in the lookup file."""
    lookup_records: str | None
    """Top-level JSON field holding the records (None for CSV lookups)."""
    group_field: str
    """Grouping column of the lookup table as loaded (dotted for nested JSON: "location.city")."""
    group_label: str
    groups: tuple[str, ...]
    n_keys: int = 24
    n_records: int = 420
    years: tuple[int, int] = (2021, 2023)

    @property
    def lookup_is_json(self) -> bool:
        return self.lookup_file.endswith(".json")

    def unit_factors(self) -> dict[str, float]:
        """Lower-cased unit spelling -> factor to the canonical unit."""
        return {unit.lower(): factor for unit, factor in self.units}


DOMAINS: tuple[DomainSpec, ...] = (
    DomainSpec(
        name="air_quality", title="Urban air-quality monitoring network", noun="reading", nouns="readings",
        main_file="readings.csv", id_col="reading_id", id_prefix="AQ", key_col="station_id", key_prefix="ST",
        date_col="sampled_on", cat_col="pollutant", categories=("PM2.5", "PM10", "NO2", "O3", "SO2"),
        cat_label="pollutant", value_col="value", unit_col="unit", measure="concentration", canonical_unit="ug/m3",
        units=(("ug/m3", 1.0), ("µg/m³", 1.0), ("mg/m3", 1000.0)), value_range=(2.0, 180.0), decimals=1,
        lookup_file="stations.json", lookup_key="station_id", lookup_records="stations",
        group_field="location.city", group_label="city",
        groups=("Riverton", "Lakeside", "Hillcrest", "Portview", "Easton", "Millbrook"),
    ),
    DomainSpec(
        name="astronomy", title="Exoplanet discovery catalogue", noun="planet", nouns="planets",
        main_file="planets.csv", id_col="planet_id", id_prefix="PL", key_col="host_star", key_prefix="HD",
        date_col="discovered", cat_col="method", categories=("Transit", "Radial Velocity", "Imaging", "Microlensing"),
        cat_label="discovery method", value_col="radius", unit_col="radius_unit", measure="radius",
        canonical_unit="R_earth", units=(("R_earth", 1.0), ("Re", 1.0), ("R_jup", 11.209)),
        value_range=(0.5, 25.0), decimals=2, lookup_file="stars.csv", lookup_key="star_id", lookup_records=None,
        group_field="constellation", group_label="constellation",
        groups=("Lyra", "Cygnus", "Draco", "Orion", "Aquila", "Vela"), n_keys=40, n_records=380,
        years=(2019, 2023),
    ),
    DomainSpec(
        name="archaeology", title="Excavation finds register", noun="find", nouns="finds", main_file="finds.csv",
        id_col="find_id", id_prefix="F", key_col="site_code", key_prefix="SITE", date_col="excavated",
        cat_col="material", categories=("Ceramic", "Bone", "Lithic", "Metal", "Glass"), cat_label="material",
        value_col="weight", unit_col="weight_unit", measure="weight", canonical_unit="g",
        units=(("g", 1.0), ("grams", 1.0), ("kg", 1000.0)), value_range=(1.5, 2500.0), decimals=1,
        lookup_file="sites.json", lookup_key="code", lookup_records="sites", group_field="meta.period",
        group_label="period", groups=("Neolithic", "Bronze Age", "Iron Age", "Roman", "Medieval"), n_keys=18,
        years=(2020, 2023),
    ),
    DomainSpec(
        name="crime", title="Municipal incident reports", noun="incident", nouns="incidents",
        main_file="incidents.csv", id_col="incident_id", id_prefix="INC", key_col="district", key_prefix="D",
        date_col="reported_date", cat_col="offense", categories=("Burglary", "Theft", "Assault", "Vandalism", "Fraud"),
        cat_label="offense type", value_col="property_loss", unit_col="currency", measure="property loss",
        canonical_unit="USD", units=(("USD", 1.0), ("usd", 1.0), ("kUSD", 1000.0)), value_range=(20.0, 40000.0),
        decimals=2, lookup_file="districts.csv", lookup_key="district_code", lookup_records=None,
        group_field="borough", group_label="borough",
        groups=("Northside", "Southside", "Old Town", "Harbor", "Uptown"), n_keys=20, n_records=450,
    ),
    DomainSpec(
        name="wildfire", title="Wildfire incident database", noun="fire", nouns="fires", main_file="fires.csv",
        id_col="fire_id", id_prefix="WF", key_col="region_code", key_prefix="FR", date_col="start_date",
        cat_col="cause", categories=("Lightning", "Campfire", "Arson", "Equipment", "Debris Burning"),
        cat_label="cause", value_col="area_burned", unit_col="area_unit", measure="burned area",
        canonical_unit="ha", units=(("ha", 1.0), ("hectares", 1.0), ("acres", 0.40468564224)),
        value_range=(0.2, 12000.0), decimals=1, lookup_file="regions.json", lookup_key="region_code",
        lookup_records="regions", group_field="ecoregion", group_label="ecoregion",
        groups=("Sierra Nevada", "Coast Range", "Great Basin", "Cascades", "Mojave"), n_keys=22, n_records=400,
        years=(2018, 2023),
    ),
    DomainSpec(
        name="biomedical", title="Clinical laboratory results", noun="sample", nouns="samples",
        main_file="samples.csv", id_col="sample_id", id_prefix="S", key_col="patient_id", key_prefix="P",
        date_col="collected", cat_col="assay", categories=("Glucose", "Cholesterol", "Triglycerides", "Urea"),
        cat_label="assay", value_col="result", unit_col="result_unit", measure="concentration",
        canonical_unit="mg/dL", units=(("mg/dL", 1.0), ("mg/dl", 1.0), ("g/L", 100.0)), value_range=(8.0, 400.0),
        decimals=1, lookup_file="patients.csv", lookup_key="patient_id", lookup_records=None,
        group_field="hospital", group_label="hospital",
        groups=("St Mary", "General", "Riverside", "University", "Mercy"), n_keys=60, n_records=430,
    ),
)

DOMAIN_BY_NAME: dict[str, DomainSpec] = {d.name: d for d in DOMAINS}
