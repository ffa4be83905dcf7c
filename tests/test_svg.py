"""The Qt-free SVG drawing of a graph (`nodegraph.model.svg`, a Graph in Jupyter)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import nodegraph
from nodegraph.model import svg

EXAMPLES = sorted(Path("examples").glob("*.json"))
NS = {"s": "http://www.w3.org/2000/svg"}


def parse(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def cards(root: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-node"): g
            for g in root.iterfind(".//s:g[@class='card']", NS)}


def corner(card: ET.Element) -> tuple[float, float]:
    x, y = re.fullmatch(r"translate\(([-\d.]+),([-\d.]+)\)", card.get("transform")).groups()
    return float(x), float(y)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_draws_one_card_per_node_and_one_curve_per_wire(path):
    graph = nodegraph.load(path)
    root = parse(graph._repr_svg_())
    drawn = cards(root)
    assert set(drawn) == set(graph.nodes)
    wires = root.findall(".//s:path[@class='wire']", NS)
    assert len(wires) == len(graph.edges)
    assert all(" C" in w.get("d") for w in wires)  # a cubic curve, as the editor's wires
    for nid, card in drawn.items():
        texts = {t.get("class"): t.text for t in card.iterfind("s:text", NS)}
        assert texts["title"].rstrip("…") == nid[:len(texts["title"].rstrip("…"))]
        assert graph.nodes[nid].type.startswith(texts["type"].rstrip("…"))


def test_cards_sit_at_the_files_positions_and_wires_end_on_their_ports():
    graph = nodegraph.load("examples/xor.json")
    root = parse(svg.graph_svg(graph))
    positions = graph.ui["positions"]
    for nid, card in cards(root).items():
        assert corner(card) == pytest.approx(tuple(positions[nid]), abs=0.05)
    # the wire data.y -> loss.target starts at data's second output, ends at loss's second
    # input: header 40 px, rows of 20 px, the dot 2 px below the row's middle
    wire = next(w for w in root.iterfind(".//s:path[@class='wire']", NS)
                if w.find("s:title", NS).text == "data.y -> loss.target")
    numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", wire.get("d"))]
    (dx, dy), (lx, ly) = positions["data"], positions["loss"]
    assert numbers[:2] == pytest.approx([dx + svg.NODE_WIDTH, dy + 40 + 1.5 * 20 + 2], abs=0.05)
    assert numbers[-2:] == pytest.approx([lx, ly + 40 + 1.5 * 20 + 2], abs=0.05)


def test_a_graph_without_positions_is_laid_out_in_layers_with_wires_running_forwards():
    graph = nodegraph.load("examples/xor.json")
    graph.replace_ui({})
    drawn = cards(parse(svg.graph_svg(graph)))
    for e in graph.edges:  # rightwards, or down to the start of the next band
        (sx, sy), (dx, dy) = corner(drawn[e.src]), corner(drawn[e.dst])
        assert sx < dx or (dx == 0 and dy > sy), str(e)
    places = [corner(c) for c in drawn.values()]
    assert len(set(places)) == len(places)  # no two cards on top of each other


def test_a_long_chain_without_positions_is_cut_into_bands():
    g = nodegraph.Graph("chain")
    prev = g.add("data.XOR", "data")
    port = "x"
    for i in range(30):
        node = g.add("activations.Tanh", f"t{i}")
        g.connect((prev, port), (node, "input"))
        prev, port = node, "output"
    root = parse(svg.graph_svg(g))
    width, height = float(root.get("width")), float(root.get("height"))
    assert 0.8 < width / height < 3.2  # near the 1.6 : 1 page, not one row 31 cards long
    drawn = cards(root)
    assert len({corner(c) for c in drawn.values()}) == 31


def test_nodes_missing_from_the_positions_go_under_the_placed_ones():
    graph = nodegraph.load("examples/xor.json")
    graph.forget_positions(["accuracy"])
    drawn = cards(parse(svg.graph_svg(graph)))
    lowest = max(y for n, (_, y) in graph.ui["positions"].items())
    assert corner(drawn["accuracy"])[1] > lowest


def test_headers_take_the_editors_colours_by_block_family_and_wires_their_port_types():
    graph = nodegraph.load("examples/xor.json")
    root = parse(svg.graph_svg(graph))
    drawn = cards(root)
    strip = drawn["loss"].findall("s:rect", NS)[1]  # the title bar's lower edge
    assert strip.get("fill") == svg.CATEGORY_COLORS["losses"]
    assert drawn["hidden"].find("s:path", NS).get("fill") == svg.darker(
        svg.CATEGORY_COLORS["layers"])
    colours = {w.find("s:title", NS).text: w.get("stroke")
               for w in root.iterfind(".//s:path[@class='wire']", NS)}
    assert colours["loss.loss -> opt.loss"] == "#e0564c"  # the loss port type
    assert colours["data.x -> hidden.input"] == "#4f9dde"  # a tensor


def test_darker_matches_qcolor_darker():
    qtgui = pytest.importorskip("PySide6.QtGui")
    for hex_ in [*svg.CATEGORY_COLORS.values(), *svg.SPARE_COLORS, svg.COMMENT_COLOR]:
        for factor in (135, 160, 330):  # Qt rounds in 16-bit HSV: one step apart at most
            ours = bytes.fromhex(svg.darker(hex_, factor / 100)[1:])
            qts = bytes.fromhex(qtgui.QColor(hex_).darker(factor).name()[1:])
            assert max(abs(a - b) for a, b in zip(ours, qts, strict=True)) <= 1, (hex_, factor)


def test_the_colours_are_the_editors():
    pytest.importorskip("PySide6")
    from nodegraph.gui.base import theme

    assert svg.CATEGORY_COLORS == theme.CATEGORY_COLORS
    assert svg.SPARE_COLORS == theme._SPARE
    for name, colours in svg.THEMES.items():
        assert colours == {k: theme.THEMES[name][k] for k in colours}
    assert svg.NODE_WIDTH == theme.NODE_WIDTH and svg.HEADER_HEIGHT == theme.HEADER_HEIGHT
    assert svg.PORT_ROW == theme.PORT_ROW
    for family in ("data", "nope", "generative"):
        assert svg.category_color(family) == theme.category_color(family).name()


def test_unknown_blocks_and_markup_in_names_still_draw_valid_svg():
    doc = json.loads(Path("examples/xor.json").read_text(encoding="utf-8"))
    doc["nodes"]["act"]["type"] = "mine.<Tanh & co>"
    graph = nodegraph.loads(json.dumps(doc))
    root = parse(svg.graph_svg(graph, theme="light"))
    act = cards(root)["act"]
    assert act.find("s:text[@class='type']", NS).text.startswith("mine.<Tanh")
    # its wires still end on dots named after the ports the wires use
    assert len(root.findall(".//s:path[@class='wire']", NS)) == len(graph.edges)
    assert {t.text for t in act.iterfind("s:text", NS)} >= {"input", "output"}


def test_a_cycle_and_an_empty_graph_draw():
    graph = nodegraph.load("examples/xor.json")
    graph.replace_ui({})
    graph.connect(("act", "output"), ("hidden", "input"), strict=False)  # a second feed
    assert len(cards(parse(svg.graph_svg(graph)))) == len(graph.nodes)
    root = parse(nodegraph.Graph("nothing")._repr_svg_())
    assert "empty graph" in "".join(root.itertext())


def test_a_wide_drawing_is_scaled_to_the_notebooks_width():
    graph = nodegraph.load("examples/cnn_digits.json")
    root = parse(graph._repr_svg_())
    assert float(root.get("width")) <= 960
    view = [float(v) for v in root.get("viewBox").split()]
    assert float(root.get("width")) / float(root.get("height")) == pytest.approx(
        view[2] / view[3], rel=0.01)
    with pytest.raises(ValueError, match="unknown theme"):
        svg.graph_svg(graph, theme="blue")


def test_backdrops_go_behind_the_cards_and_comments_over_them():
    graph = nodegraph.load("examples/xor.json")
    graph.set_ui("comments", [
        {"id": "note_1", "kind": "backdrop", "rect": [-40, -60, 500, 300], "text": "model",
         "color": "#4f8a5b"},
        {"id": "note_2", "kind": "comment", "rect": [700, 300, 200, 90],
         "text": "the loss falls below 0.01 after about 200 epochs\nsecond line"},
        {"id": "note_3", "kind": "comment", "rect": [0, 0, 10], "text": "no size"},
        {"id": "note_4", "kind": "backdrop", "rect": [0, 0, 50, 50], "color": "red<"},
    ])
    root = parse(svg.graph_svg(graph))
    kinds = [g.get("class") for g in root.findall("s:g", NS)]
    assert kinds.index("backdrop") < kinds.index("wires") < kinds.index("card")
    assert kinds[-1] == "comment" and kinds.count("backdrop") == 2  # the bad rect left out
    view = [float(v) for v in root.get("viewBox").split()]
    assert view[0] <= -40 - 24 and view[1] <= -60 - 24  # the backdrop's corner is inside
    assert view[0] + view[2] >= 900 and view[1] + view[3] >= 390
    backdrops = root.findall("s:g[@class='backdrop']", NS)
    assert backdrops[0].find("s:rect", NS).get("fill") == "#4f8a5b"
    assert backdrops[1].find("s:rect", NS).get("fill") == svg.BACKDROP_COLOR  # "red<" refused
    comment = root.find("s:g[@class='comment']", NS)
    lines = [t.text for t in comment.iterfind("s:text", NS)]
    assert len(lines) >= 3 and lines[-1] == "second line"  # wrapped to the note's width
    assert " ".join(lines[:-1]) == "the loss falls below 0.01 after about 200 epochs"
    assert all(len(line) * 6.9 <= 200 - 28 for line in lines)
    ys = [float(t.get("y")) for t in comment.iterfind("s:text", NS)]
    assert ys == sorted(ys) and ys[-1] < 90  # one under the other, inside the note
