"""The messages TensorBoard's plugins keep in a summary's metadata (its
plugin_data content), encoded by hand like _events.py, with the field
numbers of TensorBoard's own protos:

hparams (plugins/hparams/plugin_data.proto, api.proto; google.protobuf's
struct.proto for values):
    HParamsPluginData: version 1, experiment 2, session_start_info 3,
                       session_end_info 4
    Experiment: hparam_infos 4 (HParamInfo), metric_infos 5 (MetricInfo)
    HParamInfo: name 1, type 4 (DataType: STRING 1, BOOL 2, FLOAT64 3),
                domain_discrete 5 (ListValue)
    MetricInfo: name 1 (MetricName: group 1, tag 2)
    SessionStartInfo: hparams 1 (map<string, Value>: key 1, value 2),
                      group_name 4, start_time_secs 5
    SessionEndInfo: status 1 (STATUS_SUCCESS = 1), end_time_secs 2
    Value: number_value 2 (double), string_value 3, bool_value 4
    ListValue: values 1 (Value)
PR curves (plugins/pr_curve/plugin_data.proto):
    PrCurvePluginData: version 1, num_thresholds 2
custom scalars (plugins/custom_scalar/layout.proto):
    Layout: version 1, category 2 (Category: title 1, chart 2, closed 3)
    Chart: title 1, multiline 2 (MultilineChartContent: tag 1), margin 3
           (MarginChartContent: series 1 (Series: value 1, lower 2, upper 3))
"""
from . import _events as E

HPARAMS = "hparams"
EXPERIMENT_TAG = "_hparams_/experiment"
SESSION_START_TAG = "_hparams_/session_start_info"
SESSION_END_TAG = "_hparams_/session_end_info"
DATA_TYPE = {str: 1, bool: 2, float: 3}
STATUS_SUCCESS = 1
CUSTOM_SCALARS_TAG = "custom_scalars__config__"


def value(x):
    """A google.protobuf.Value of a str, bool or float (bool before int)."""
    if isinstance(x, str):
        return E.f_bytes(3, x)
    if isinstance(x, bool):
        return E.f_varint(4, int(x))
    return E.f_double(2, x)


def list_value(xs):
    return b"".join(E.f_bytes(1, value(x)) for x in xs)


def hparams_content(which, message):
    """HParamsPluginData (version 0) holding one of its three records."""
    field = {"experiment": 2, "session_start_info": 3, "session_end_info": 4}[which]
    return E.f_bytes(field, message)  # version 0 is the default: not written


def experiment(hparams, metrics, domains):
    """hparams: {name: (kind, value)} with kind str, bool or float; metrics:
    metric tags; domains: {name: list of values}."""
    out = b""
    for name, (kind, _) in hparams.items():
        info = E.f_bytes(1, name) + E.f_varint(4, DATA_TYPE[kind])
        if name in domains:
            info += E.f_bytes(5, list_value(domains[name]))
        out += E.f_bytes(4, info)
    for tag in metrics:
        out += E.f_bytes(5, E.f_bytes(1, E.f_bytes(2, tag)))
    return out


def session_start(hparams, start_time, group_name=""):
    out = b""
    for name, (_, x) in hparams.items():
        out += E.f_bytes(1, E.f_bytes(1, name) + E.f_bytes(2, value(x)))
    if group_name:
        out += E.f_bytes(4, group_name)
    return out + E.f_double(5, start_time)


def session_end(end_time):
    return E.f_varint(1, STATUS_SUCCESS) + E.f_double(2, end_time)


def pr_curve_content(num_thresholds):
    return E.f_varint(2, num_thresholds)  # version 0: not written


def layout(categories):
    """categories: [(title, closed, [(chart title, kind, tags)])], kind
    "Multiline" (tags: regular expressions) or "Margin" (tags: [value,
    lower, upper])."""
    out = b""
    for title, closed, charts in categories:
        cat = E.f_bytes(1, title)
        for chart_title, kind, tags in charts:
            if kind == "Multiline":
                content = E.f_bytes(2, b"".join(E.f_bytes(1, t) for t in tags))
            else:
                series = E.f_bytes(1, tags[0]) + E.f_bytes(2, tags[1]) + E.f_bytes(3, tags[2])
                content = E.f_bytes(3, E.f_bytes(1, series))
            cat += E.f_bytes(2, E.f_bytes(1, chart_title) + content)
        if closed:
            cat += E.f_varint(3, 1)
        out += E.f_bytes(2, cat)
    return out
