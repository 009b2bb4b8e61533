"""Fixtures of the image tests (tests/images): the built images, the containers a test starts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from image_support import APP_IMAGE, PG_IMAGE, Containers, podman


@pytest.fixture(scope="module")
def images() -> None:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: the images were NOT run (make images installs it)")
    for ref in (APP_IMAGE, PG_IMAGE):
        if podman("image", "exists", ref, check=False).returncode != 0:
            pytest.fail(f"{ref} is not built: run `make images` first")


@pytest.fixture()
def containers(images: None) -> Iterator[Containers]:
    started = Containers()
    try:
        yield started
    finally:
        started.remove()
