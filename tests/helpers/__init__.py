"""Plain helpers shared by the test folders, one module per thing helped (fixtures stay in the
conftest.py files). Imported one way everywhere: ``from tests.helpers.workflow import ...``
(pyproject's pytest ``pythonpath`` puts the repository root on ``sys.path``)."""
