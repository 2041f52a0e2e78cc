# SPDX-License-Identifier: Apache-2.0

"""The hub's web dashboard in a real browser: Debian's headless chromium through
selenium and chromium-driver, against a real mosquitto (the secured setup), a
real thingif-hub and the Python appliance (python/examples/aircon.py).

Signs in (login and password at 1280 px, a pasted token at 390 px), sends
commands from the page's form, waits for their results to arrive through the
event stream (server-sent events, opened with a single-use ticket), and checks
the state-history chart. Screenshots go to artifacts/dashboard/ at the top of
the repository (gitignored), or to $THINGIF_ARTIFACTS.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO, LineLog, rest, stop_process
from test_thingif import child_env

APP = "demoApp"
PASSWORD = "dash-pass-1"


def artifacts_dir():
    d = Path(os.environ.get("THINGIF_ARTIFACTS") or REPO / "artifacts") / "dashboard"
    d.mkdir(parents=True, exist_ok=True)
    return d


def browser_paths():
    """Debian's chromium and chromedriver. Missing ones fail the test: CI
    installs them (scripts/install-deps.sh), so a skip would hide a gap."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.access("/usr/bin/chromedriver", os.X_OK)
                                              else None)
    if not chromium or not driver:
        pytest.fail("chromium and chromedriver are required (apt install chromium chromium-driver; "
                    "scripts/install-deps.sh does)")
    return chromium, driver


def start_browser(tmp_path, width):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = browser_paths()
    opts = Options()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--disable-extensions", "--user-data-dir=%s" % (tmp_path / ("chrome-%d" % width))):
        opts.add_argument(a)
    if width < 600:
        # A phone: its viewport and touch, as Chrome's device emulation gives them.
        opts.add_experimental_option("mobileEmulation",
                                     {"deviceMetrics": {"width": width, "height": 844, "pixelRatio": 3.0}})
    else:
        opts.add_argument("--window-size=%d,1000" % width)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=driver_path, log_output=str(tmp_path / ("chromedriver-%d.log" % width)))
    return webdriver.Chrome(service=service, options=opts)


def wait(driver, what, timeout=20):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: what(d))


def fresh(read, tries=20):
    """read(), again when the page re-rendered the elements it was reading."""
    from selenium.common.exceptions import StaleElementReferenceException
    for _ in range(tries - 1):
        try:
            return read()
        except StaleElementReferenceException:
            time.sleep(0.1)
    return read()


def command_rows(driver, cid):
    """[(mark, action, message, data)] of a command's result rows."""
    from selenium.webdriver.common.by import By

    def read():
        rows = driver.find_elements(By.CSS_SELECTOR, 'tr.result[data-command="%s"]' % cid)
        return [tuple(td.text for td in r.find_elements(By.TAG_NAME, "td")) for r in rows]
    return fresh(read)


def send_from_form(driver, actions):
    """Fills the send form with [(name, params JSON)] and sends; returns the new commandID."""
    from selenium.webdriver.common.by import By
    before = fresh(lambda: {e.get_attribute("data-command")
                            for e in driver.find_elements(By.CSS_SELECTOR, "tr.command")})
    rows = driver.find_elements(By.CSS_SELECTOR, "#actions .action-row")
    while len(rows) < len(actions):
        driver.find_element(By.ID, "add-action").click()
        rows = driver.find_elements(By.CSS_SELECTOR, "#actions .action-row")
    for row in rows[len(actions):]:
        row.find_element(By.CSS_SELECTOR, "button.remove").click()
    rows = driver.find_elements(By.CSS_SELECTOR, "#actions .action-row")
    for row, (name, params) in zip(rows, actions):
        for cls, value in ((".action-name", name), (".action-params", params)):
            box = row.find_element(By.CSS_SELECTOR, cls)
            box.clear()
            box.send_keys(value)
    driver.find_element(By.ID, "send").click()

    def new_command(d):
        now = fresh(lambda: [e.get_attribute("data-command") for e in d.find_elements(By.CSS_SELECTOR, "tr.command")])
        new = [c for c in now if c not in before]
        return new[0] if new else None
    return wait(driver, new_command)


def finished_by_event(driver, cid, timeout=20):
    """Waits until the command's row was refreshed by a result notification."""
    from selenium.webdriver.common.by import By

    def done(d):
        def read():
            rows = d.find_elements(By.CSS_SELECTOR, 'tr.command[data-command="%s"][data-via="event"]' % cid)
            state = rows[0].get_attribute("data-state") if rows else None
            return state if state in ("DONE", "INCOMPLETE") else None
        return fresh(read)
    try:
        return wait(driver, done, timeout)
    except Exception:
        raise AssertionError("no result notification for %s within %d s; page:\n%s"
                             % (cid, timeout, driver.find_element(By.TAG_NAME, "main").text))


def command_head(driver, cid):
    """(data-state, text) of a command's head row, or (None, "")."""
    from selenium.webdriver.common.by import By

    def read():
        rows = driver.find_elements(By.CSS_SELECTOR, 'tr.command[data-command="%s"]' % cid)
        return (rows[0].get_attribute("data-state"), rows[0].text) if rows else (None, "")
    return fresh(read)


def expiry_and_cancel(driver, stop_thing, hub_out, thing_id):
    """A command with a time to live shows its expiry; then, with the thing
    stopped, a command waits SENDING with a Cancel button, and the button
    makes it CANCELLED (docs/PROTOCOL.md 9.1)."""
    from selenium.webdriver.common.by import By
    ttl = driver.find_element(By.ID, "ttl")
    ttl.clear()
    ttl.send_keys("600")
    timed = send_from_form(driver, [("turnPower", '{"power":false}')])
    assert finished_by_event(driver, timed) == "DONE"
    assert "expires" in command_head(driver, timed)[1], command_head(driver, timed)
    assert not driver.find_elements(By.CSS_SELECTOR, 'button[data-cancel="%s"]' % timed), "a done command has no Cancel"
    ttl.clear()

    stop_thing()
    hub_out.wait_for(r"^hub: %s is offline" % re.escape(thing_id), timeout=30)
    held = send_from_form(driver, [("turnPower", '{"power":true}')])
    assert command_head(driver, held)[0] == "SENDING", command_head(driver, held)
    button = wait(driver, lambda d: fresh(
        lambda: (d.find_elements(By.CSS_SELECTOR, 'button[data-cancel="%s"]' % held) or [None])[0]))
    button.click()
    wait(driver, lambda d: command_head(d, held)[0] == "CANCELLED")
    assert not driver.find_elements(By.CSS_SELECTOR, 'button[data-cancel="%s"]' % held)


def run_dashboard(driver, base, login, token, width, shots, tmp_path, after=None):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver.get(base + "/dashboard/")
    assert driver.title == "thingif dashboard"
    if login:
        driver.find_element(By.ID, "login").send_keys(login)
        driver.find_element(By.ID, "password").send_keys(PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
    else:
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "#token-form button").click()
    # The thing is listed, online, with its type and firmware.
    first_row = 'css selector', "#things tbody tr"

    def first_thing_text(d):
        rows = d.find_elements(*first_row)
        return rows[0].text if rows else ""
    wait(driver, lambda d: "online" in fresh(lambda: first_thing_text(d)))
    cells = fresh(lambda: [td.text for td in driver.find_element(*first_row).find_elements(By.TAG_NAME, "td")])
    assert cells[1:] == ["online", "AirConditioner", "1.0.0"], cells
    # The Things table fits its card: no column hidden behind a horizontal scroller.
    overflow = driver.execute_script(
        "const s = document.querySelector('#things-card .scroll'); return s.scrollWidth - s.clientWidth;")
    assert overflow <= 0, "the Things table is %d px wider than its card at %d px" % (overflow, width)
    # The token is in sessionStorage, never in the URL.
    assert driver.execute_script("return sessionStorage.getItem('thingif.token')")
    assert "token" not in driver.current_url
    wait(driver, lambda d: d.find_element(By.ID, "live").text == "live")
    fresh(lambda: driver.find_element(*first_row).click())
    wait(driver, lambda d: d.find_element(By.ID, "thing").is_displayed())

    cid = send_from_form(driver, [("turnPower", '{"power":true}'),
                                  ("setPresetTemperature", '{"presetTemperature":%d}' % (20 + width % 7)),
                                  ("setFanSpeed", '{"fanSpeed":5}')])
    assert finished_by_event(driver, cid) == "DONE"
    rows = command_rows(driver, cid)
    assert [r[:3] for r in rows] == [("✓", "turnPower", ""), ("✓", "setPresetTemperature", ""),
                                     ("✓", "setFanSpeed", "")], rows
    # The appliance's result data: the preset it replaced.
    assert rows[0][3] == "" and rows[2][3] == "", rows
    assert isinstance(json.loads(rows[1][3])["previousPresetTemperature"], int), rows

    bad = send_from_form(driver, [("setPresetTemperature", '{"presetTemperature":99}')])
    assert finished_by_event(driver, bad) == "INCOMPLETE"
    assert command_rows(driver, bad) == [("✗", "setPresetTemperature",
                                          "presetTemperature 99 is out of range 16..30", "")], command_rows(driver, bad)

    # The state, and its history as an SVG path through the samples.
    wait(driver, lambda d: '"fanSpeed": 5' in d.find_element(By.ID, "state").text)
    fresh(lambda: Select(driver.find_element(By.ID, "field")).select_by_value("presetTemperature"))
    driver.find_element(By.ID, "reload-chart").click()

    def path_with_points(d):
        # One script reads the path whole: the page may redraw it between two WebDriver calls.
        got = d.execute_script("const p = document.querySelector('#chart path.line');"
                               "return p ? [p.getAttribute('d'), p.getAttribute('data-points')] : null")
        return got if got and int(got[1] or 0) >= 2 else None
    d_attr, _ = wait(driver, path_with_points)
    points = re.findall(r"[ML]([\d.]+) ([\d.]+)", d_attr)
    assert len(points) >= 2, d_attr
    assert len({y for _, y in points}) >= 2, "the preset temperature changed, so the line must too: " + d_attr
    fresh(lambda: Select(driver.find_element(By.ID, "interval")).select_by_value("1_MINUTE"))
    assert wait(driver, lambda d: d.execute_script("return document.querySelectorAll('#chart path.line').length"))

    # Usable at this width: nothing wider than the screen.
    inner = driver.execute_script("return window.innerWidth")
    scroll = driver.execute_script("return document.documentElement.scrollWidth")
    assert inner == width, (inner, width)
    assert scroll <= inner + 1, "the page is %d px wide on a %d px screen" % (scroll, inner)

    driver.save_screenshot(str(shots / ("dashboard-%d.png" % width)))
    driver.find_element(By.ID, "chart").screenshot(str(shots / ("chart-%d.png" % width)))

    if after:
        after(driver)

    csp = [e for e in driver.get_log("browser") if "Content Security Policy" in e.get("message", "")]
    assert not csp, csp
    driver.find_element(By.ID, "signout").click()
    wait(driver, lambda d: d.find_element(By.ID, "signin").is_displayed())
    assert driver.execute_script("return sessionStorage.length") == 0


def test_dashboard_in_a_real_browser(hub, broker, tmp_path):
    browser_paths()
    base = "http://127.0.0.1:%s" % hub.out.wait_for(r"HTTP API on http://127\.0\.0\.1:(\d+)/", timeout=15).group(1)

    vendor_id = "AC-DASH-" + uuid.uuid4().hex[:8]
    aircon = subprocess.Popen([sys.executable, str(PYTHON_DIR / "examples" / "aircon.py"),
                               "--port", str(broker.port), "--storage", str(tmp_path / "aircon"),
                               "--vendor-thing-id", vendor_id, "--password", "thing-pw",
                               "--run-seconds", "300"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=child_env())
    drivers = []
    try:
        aircon_out = LineLog(aircon.stdout, tmp_path / "aircon.log")
        thing_id = aircon_out.wait_for(r"onboarded as (\S+);", timeout=30).group(1)
        hub.out.wait_for(r"^hub: %s is online" % re.escape(thing_id), timeout=30)

        login = "dash-" + uuid.uuid4().hex[:6]
        status, user = rest(base, "POST", "/api/apps/%s/users" % APP, {"loginName": login, "password": PASSWORD})
        assert status in (200, 201), (status, user)
        status, body = rest(base, "POST", "/thing-if/apps/%s/onboardings" % APP,
                            {"vendorThingID": vendor_id, "thingPassword": "thing-pw",
                             "owner": "user:" + user["userID"], "dataGroupingInterval": "1_MINUTE"},
                            token=user["accessToken"],
                            content_type="application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
        assert status == 200, (status, body)

        shots = artifacts_dir()
        for width, by_login in ((1280, True), (390, False)):
            driver = start_browser(tmp_path, width)
            drivers.append(driver)
            # The last round also stops the thing, for the cancel.
            after = None if width == 1280 else (
                lambda d: expiry_and_cancel(d, lambda: stop_process(aircon), hub.out, thing_id))
            try:
                run_dashboard(driver, base, login if by_login else None, user["accessToken"], width, shots, tmp_path,
                              after)
            except BaseException:
                driver.save_screenshot(str(shots / ("failed-%d.png" % width)))
                raise
            driver.quit()
            drivers.remove(driver)
    finally:
        for d in drivers:
            d.quit()
        stop_process(aircon)
