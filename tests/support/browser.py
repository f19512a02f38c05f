"""A real headless Chromium for the web console's tests: Debian's ``chromium`` driven through
its ``chromedriver`` by selenium (no browser download; ``make browser`` installs both).

Each browser gets its own profile folder under the test's temp dir, so nothing of a real
user's browser is read or written. Every wait is on a DOM condition with a generous deadline,
never a sleep.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: Seconds any one wait for the page may take (a loaded 2-core CI machine is slow).
DEADLINE = 30.0


def browser_binaries() -> tuple[str, str] | None:
    chromium = os.environ.get("POWERCONTEXT_TEST_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("POWERCONTEXT_TEST_CHROMEDRIVER") or shutil.which("chromedriver")
    if not chromium or not driver:
        return None
    return chromium, driver


def require_browser() -> tuple[str, str]:
    """The Chromium and chromedriver paths; skips without them — except under CI, which must
    run the browser tests (``make test`` installs them: ``make browser``)."""
    found = browser_binaries()
    reason = "no chromium/chromedriver: `make browser` (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        found, reason = None, "selenium is not installed (the root pyproject's dev extra)"
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests must run in CI: {reason}")
        pytest.skip(reason)
    return found


@dataclass
class Browser:
    """The selenium driver plus the few waits the console tests need."""

    driver: Any
    base_url: str

    def open(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def wait(self, condition: Any, timeout: float = DEADLINE) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(condition)

    def element(self, css: str, timeout: float = DEADLINE) -> Any:
        """The element matching ``css`` once it is in the page and visible."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        return self.wait(ec.visibility_of_element_located((By.CSS_SELECTOR, css)), timeout)

    def gone(self, css: str, timeout: float = DEADLINE) -> None:
        from selenium.webdriver.common.by import By

        self.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, css), timeout)

    def text_in(self, css: str, text: str, timeout: float = DEADLINE) -> Any:
        """The element matching ``css`` once its visible text contains ``text``."""
        from selenium.webdriver.common.by import By

        def found(driver: Any) -> Any:
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                try:
                    if text in element.text:
                        return element
                except Exception:  # replaced while we looked: look again
                    continue
            return False

        return self.wait(found, timeout)

    def click(self, css: str) -> None:
        """Click the element matching ``css`` once it is visible and enabled; if the page
        replaces it meanwhile (a list re-rendered), the new one is clicked."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.common.by import By

        def clicked(driver: Any) -> bool:
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                try:
                    if element.is_displayed() and element.is_enabled():
                        element.click()
                        return True
                except StaleElementReferenceException:
                    return False
            return False

        self.wait(clicked)

    def type(self, css: str, text: str, *, clear: bool = True) -> None:
        element = self.element(css)
        if clear:
            element.clear()
        element.send_keys(text)

    def focused(self) -> Any:
        return self.driver.switch_to.active_element

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        assert self.driver.save_screenshot(str(path)), path

    def console_errors(self, *, http_errors: bool = False) -> list[str]:
        """The page's console messages of level SEVERE (CSP violations, script errors); the
        browser's note of each 4xx answer (an expected 401 or 409) only with ``http_errors``."""
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry.get("level") == "SEVERE"
            and (http_errors or "the server responded with a status of 4" not in entry["message"])
        ]


@contextmanager
def start_browser(
    profile_root: Path,
    base_url: str,
    *,
    language: str = "en-US",
    size: tuple[int, int] = (1280, 900),
) -> Iterator[Browser]:
    """A headless Chromium with a fresh profile in ``profile_root`` (a test's temp dir)."""
    chromium, driver_path = require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile_root.mkdir(parents=True, exist_ok=True)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-component-update",
        "--metrics-recording-only",
        "--password-store=basic",
        f"--user-data-dir={profile_root / 'profile'}",
        f"--disk-cache-dir={profile_root / 'cache'}",
        f"--window-size={size[0]},{size[1]}",
        f"--lang={language}",
    ):
        options.add_argument(argument)
    if os.geteuid() == 0:  # Chromium refuses to run as root with its sandbox
        options.add_argument("--no-sandbox")
    options.add_experimental_option("prefs", {"intl.accept_languages": language})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    home = profile_root / "home"
    home.mkdir(exist_ok=True)
    service = Service(
        executable_path=driver_path,
        log_output=str(profile_root / "chromedriver.log"),
        env={
            **os.environ,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
        },
    )
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.set_page_load_timeout(DEADLINE * 2)
        driver.set_script_timeout(DEADLINE)
        yield Browser(driver, base_url)
    finally:
        driver.quit()


def log_in(browser: Browser, token: str) -> None:
    """Sign in to the console with the keyboard only, as a reviewer would."""
    from selenium.webdriver.common.keys import Keys

    browser.open("/ui/")
    field = browser.element("#login-token")
    assert browser.focused() == field  # the login page starts in the token field
    field.send_keys(token, Keys.ENTER)  # keyboard only
    browser.element("#who")


def open_candidate(browser: Browser, candidate_id: str) -> None:
    """Open a candidate in the review list and wait until its field diff has rendered."""
    browser.click(f'button.candidate[data-candidate="{candidate_id}"]')
    browser.element(f'#candidate-detail article[data-candidate="{candidate_id}"]')
    browser.element("#diff-body .fieldname")
