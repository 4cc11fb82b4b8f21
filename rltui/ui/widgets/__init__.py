"""One pane per module; each has ``show(view)``, called after every evaluation."""

from rltui.ui.widgets.gpu_table import GpuPane
from rltui.ui.widgets.header import HeaderBar
from rltui.ui.widgets.log_pane import LogPane
from rltui.ui.widgets.nodes_table import NodesPane
from rltui.ui.widgets.rank_table import RankPane
from rltui.ui.widgets.symptoms import SymptomsPane

__all__ = ["GpuPane", "HeaderBar", "LogPane", "NodesPane", "RankPane", "SymptomsPane"]
