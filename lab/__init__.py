"""Research code on Echo Memory's retrieval: experiments that are not part of the product.

Nothing here ships in the wheel (pyproject's packages.find leaves `lab` out) and the product never
imports it; lab code imports the product. Run the experiments with `python -m lab --help` from the
repository root; lab/README.md lists them.
"""
