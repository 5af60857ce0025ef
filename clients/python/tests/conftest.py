"""The controller these tests talk to is started by test/e2e/python-client.test.ts (`pnpm test`), which
passes its address and token; run them through it rather than on their own."""

import os

import pytest

from sluice_client import QuotaClient


@pytest.fixture(scope="session")
def controller() -> tuple[str, str]:
    address = os.environ.get("SLUICE_CONTROLLER")
    token = os.environ.get("SLUICE_CONTROLLER_TOKEN")
    if not address or not token:
        pytest.fail(
            "SLUICE_CONTROLLER and SLUICE_CONTROLLER_TOKEN are not set: run these tests with "
            "`pnpm test test/e2e/python-client.test.ts`, which starts a real `sluice controller` for them"
        )
    return address, token


@pytest.fixture
def quota(controller):
    address, token = controller
    client = QuotaClient(address, client_id="pytest", token=token)
    yield client
    client.close()
