"""``posenc explore``'s page in a real browser: Debian's headless chromium, driven by Selenium, against a real
server (``posenc.explore.make_server`` on 127.0.0.1, any free port) in a thread of this process.

The page is loaded once for the module; each test sets the controls it reads. The browser comes from apt
(``make test`` installs ``chromium`` and ``chromium-driver`` where they are missing); Selenium is given both
paths, so Selenium Manager never runs and nothing is downloaded. A missing browser fails, never skips.
"""

from __future__ import annotations

import base64
import json
import threading

import numpy as np
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

import posenc
from posenc import presets
from posenc.decimals import shortest
from tests.rope.test_rope_parameters import CONFIGS
from tests.support import browser
from tests.support.browser import by_id, chromium

WAIT_S = 20  # the longest any view may take to settle (criteria at 4,096 positions included)

LLAMA3_CONFIG = CONFIGS["llama31_8b"]  # Llama 3.1 8B's config.json, the parts RoPE reads


@pytest.fixture(scope="module")
def origin():
    from posenc.explore import make_server

    server = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, name="posenc-explore", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    try:
        browser = chromium(tmp_path_factory.mktemp("chromium-profile"), console=True)
    except RuntimeError as missing:
        pytest.fail(str(missing))
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="module")
def page(origin, driver):
    driver.get(f"{origin}/")
    wait_ready(driver)
    return driver


# --- helpers ----------------------------------------------------------------------------------------------


def text(driver, testid):
    return by_id(driver, testid).text


def wait_ready(driver):
    browser.wait_ready(driver, WAIT_S)


def type_into(driver, testid, value):
    """Replace the control's text the way a person does: select all, type."""
    element = by_id(driver, testid)
    element.send_keys(Keys.CONTROL, "a")
    element.send_keys(str(value))


def set_options(driver, **values):
    """Set the option controls (select by value, inputs by typing), then wait until the views settle. The
    mouse leaves the heatmap first, so that no hover moves the selection meanwhile."""
    ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
    for name, value in values.items():
        testid = name.replace("_", "-")
        element = by_id(driver, testid)
        if element.tag_name == "select":
            Select(element).select_by_value(str(value))
        elif element.get_attribute("value") != str(value):
            type_into(driver, testid, value)
    wait_ready(driver)
    assert text(driver, "error") == "", text(driver, "error")


def exact_text(position, column, d_model, dtype, **options):
    """posenc's value at (position, column) as the value endpoint writes it: the CLI's csv/json form."""
    row = posenc.table(1, d_model, start=position, dtype=dtype, **options)
    if dtype == "float64":
        return repr(float(row[0, column]))
    return shortest(row[:, column : column + 1])(0)


def heatmap_geometry(driver):
    canvas = by_id(driver, "heatmap")
    shape = [int(n) for n in canvas.get_attribute("data-shape").split(",")]
    plot = [float(n) for n in canvas.get_attribute("data-plot").split(",")]
    width = int(canvas.get_attribute("width"))
    return canvas, shape, plot, canvas.rect["width"] / width


def hover_cell(driver, index, column):
    """Move the mouse to the centre of the cell (start + index, column) of the heatmap as drawn."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", by_id(driver, "heatmap"))
    canvas, (length, d_model), (left, top, w, h), css_per_px = heatmap_geometry(driver)
    x = (left + (index + 0.5) * w / length) * css_per_px - canvas.rect["width"] / 2
    y = (top + (column + 0.5) * h / d_model) * css_per_px - canvas.rect["height"] / 2
    ActionChains(driver).move_to_element_with_offset(canvas, round(x), round(y)).perform()
    wait_ready(driver)


def severe(entries):
    return [entry for entry in entries if entry["level"] == "SEVERE"]


# --- tests ------------------------------------------------------------------------------------------------


def test_the_page_loads_every_view_without_a_console_error(page):
    assert text(page, "status") == "ready"
    assert text(page, "error") == ""
    assert page.title == "posenc explore"
    assert by_id(page, "heatmap").get_attribute("data-shape") == "64,64"
    assert text(page, "collisions") == f"posenc: 0 · usual code: {text(page, 'collisions-usual')}"
    rows = page.find_elements(By.CSS_SELECTOR, '[data-testid="criteria"] tbody tr')
    names = {row.get_attribute("data-testid") for row in rows}
    assert {"criterion-unique", "criterion-bounded"} <= names, names
    assert all(row.find_elements(By.CSS_SELECTOR, "td")[0].text in ("PASS", "FAIL") for row in rows)
    assert by_id(page, "criterion-unique").find_elements(By.CSS_SELECTOR, "td")[0].text == "PASS"
    assert "default" in text(page, "rope-types").split(", ")
    assert severe(page.get_log("browser")) == []
    # every label names a control that exists
    for label in page.find_elements(By.CSS_SELECTOR, "label[for]"):
        assert page.find_elements(By.ID, label.get_attribute("for")), label.get_attribute("for")


def test_changing_d_model_and_base_redraws_and_the_value_follows(page):
    set_options(page, d_model=64, base=10000, start=0, length=64, dtype="float32", layout="interleaved")
    hover_cell(page, 5, 6)
    before = text(page, "value")
    assert before == exact_text(5, 6, 64, "float32")
    draws = int(by_id(page, "heatmap").get_attribute("data-draws"))
    set_options(page, d_model=32, base=500)
    canvas = by_id(page, "heatmap")
    assert canvas.get_attribute("data-shape") == "64,32"
    assert int(canvas.get_attribute("data-draws")) > draws
    assert (text(page, "value-position"), text(page, "value-column")) == ("5", "6")  # the selection stays
    expected = exact_text(5, 6, 32, "float32", base=500.0)
    assert text(page, "value") == expected
    assert expected != before


def test_hovering_a_cell_selects_it_and_shows_posencs_value(page):
    set_options(page, d_model=16, base=10000, start=100, length=40, dtype="float32", layout="sin_cos")
    for index, column in ((7, 3), (31, 12)):
        hover_cell(page, index, column)
        assert (int(text(page, "value-position")), int(text(page, "value-column"))) == (100 + index, column)
        expected = exact_text(100 + index, column, 16, "float32", layout="sin_cos")
        assert text(page, "value") == expected
    set_options(page, layout="interleaved")


def test_bfloat16_has_more_usual_code_collisions_than_float32(page):
    set_options(page, d_model=64, base=10000, start=0, length=4096, dtype="float32")
    float32 = int(text(page, "collisions-usual"))
    set_options(page, dtype="bfloat16")
    assert by_id(page, "heatmap").get_attribute("data-dtype") == "bfloat16"
    bfloat16 = int(text(page, "collisions-usual"))
    assert float32 == 0  # every float32 row of the usual code differs over 0..4095 at d_model 64
    assert bfloat16 > float32  # bfloat16's angles collide from position 257 on
    assert text(page, "collisions") == f"posenc: 0 · usual code: {bfloat16}"
    set_options(page, dtype="float32", length=64)


def test_dropping_a_diffusers_table_names_it_and_gives_the_line_to_paste(page, tmp_path):
    table = presets.get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0).table(1000, 64)
    path = tmp_path / "timesteps.npy"
    np.save(path, table)
    for stale in ("verdict", "paste"):
        assert text(page, stale) == ""
    by_id(page, "file-input").send_keys(str(path))
    WebDriverWait(page, WAIT_S, poll_frequency=0.05).until(lambda d: text(d, "verdict") != "")
    wait_ready(page)
    assert text(page, "error") == ""
    assert "diffusers" in text(page, "verdict")
    assert "posenc.torch.Timesteps(" in text(page, "paste")
    assert by_id(page, "audit-findings").find_elements(By.CSS_SELECTOR, "li")


def test_a_file_dropped_on_the_drop_zone_is_identified(page, tmp_path):
    path = tmp_path / "paper.npy"
    np.save(path, presets.get("paper").table(200, 48))
    payload = base64.b64encode(path.read_bytes()).decode()
    page.execute_script(
        "const bytes = Uint8Array.from(atob(arguments[1]), (c) => c.charCodeAt(0));"
        "const transfer = new DataTransfer();"
        "transfer.items.add(new File([bytes], 'paper.npy'));"
        "arguments[0].dispatchEvent(new DragEvent('drop', {dataTransfer: transfer, bubbles: true}));",
        by_id(page, "drop-zone"),
        payload,
    )
    WebDriverWait(page, WAIT_S, poll_frequency=0.05).until(lambda d: "matches: paper" in text(d, "verdict"))
    wait_ready(page)
    assert text(page, "error") == ""
    assert "paper.npy" in text(page, "identify-file")
    assert "Timesteps" not in text(page, "paste")


def test_a_pasted_llama3_config_adds_its_line(page):
    wait_ready(page)
    assert not any(name.startswith("config") for name in text(page, "rope-types").split(", "))
    area = by_id(page, "rope-config")
    page.execute_script(
        "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
        area,
        json.dumps(LLAMA3_CONFIG, indent=2),
    )
    by_id(page, "rope-apply").click()
    wait_ready(page)
    assert text(page, "error") == ""
    names = text(page, "rope-types").split(", ")
    assert "config (llama3)" in names, names
    assert {"default", "linear", "dynamic", "yarn", "llama3"} <= set(names), names


def test_a_config_json_dropped_on_the_text_area_is_read_and_applied(page):
    wait_ready(page)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    config = {
        "head_dim": 128,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": yarn,
    }
    page.execute_script(
        "const transfer = new DataTransfer();"
        "transfer.items.add(new File([arguments[1]], 'config.json', {type: 'application/json'}));"
        "arguments[0].dispatchEvent(new DragEvent('drop', {dataTransfer: transfer, bubbles: true}));",
        by_id(page, "rope-config"),
        json.dumps(config),
    )
    WebDriverWait(page, WAIT_S, poll_frequency=0.05).until(
        lambda d: "config (yarn)" in text(d, "rope-types").split(", ")
    )
    wait_ready(page)
    assert text(page, "error") == ""
    assert json.loads(by_id(page, "rope-config").get_attribute("value")) == config


def test_a_bad_input_shows_an_error_naming_it_and_the_page_recovers(page):
    set_options(page, d_model=64, base=10000, start=0, length=64, dtype="float32")
    page.get_log("browser")  # drop what came before
    type_into(page, "d-model", 0)
    wait_ready(page)
    assert "d_model" in text(page, "error")
    logged = severe(page.get_log("browser"))
    assert all("status of 400" in entry["message"] for entry in logged), logged  # the 400s, nothing else
    set_options(page, d_model=24)  # set_options asserts the error is gone
    assert by_id(page, "heatmap").get_attribute("data-shape") == "64,24"
    column = int(text(page, "value-column"))
    assert column < 24
    assert text(page, "value") == exact_text(int(text(page, "value-position")), column, 24, "float32")


def test_no_request_leaves_the_server(page, origin):
    wait_ready(page)
    names = page.execute_script(
        "return performance.getEntriesByType('resource').map((e) => e.name)"
        ".concat(performance.getEntriesByType('navigation').map((e) => e.name))"
    )
    assert len(names) > 5  # the page's files and its API calls were recorded
    elsewhere = [name for name in names if not name.startswith(f"{origin}/")]
    assert elsewhere == []
    assert any(name.startswith(f"{origin}/api/table?") for name in names)
