import pytest


@pytest.fixture(scope="session")
def countries():
    from structgen.kg import load_kg

    return load_kg("countries")
