"""The event stream: schema, and the transport that carries events between processes."""

from gpuscale.events.schema import (
    EVENT_TYPES,
    SCHEMA_MAJOR,
    SCHEMA_VERSION,
    DeviceInfo,
    EndEvent,
    ErrorEvent,
    Event,
    GpuSample,
    HostSample,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
    decode,
    encode,
    to_builtins,
)

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_MAJOR",
    "SCHEMA_VERSION",
    "DeviceInfo",
    "EndEvent",
    "ErrorEvent",
    "Event",
    "GpuSample",
    "HostSample",
    "LogEvent",
    "PhaseEvent",
    "StartEvent",
    "StepEvent",
    "decode",
    "encode",
    "to_builtins",
]
