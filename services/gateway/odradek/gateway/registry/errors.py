"""The schema registry's errors: Confluent Schema Registry's HTTP status and error code for each
(its ``Errors`` table: 40401 subject not found, 42201 invalid schema, 409 incompatible...).

They are ``GatewayError``s carrying their own status and code, because the registry's codes
overlap the REST Proxy's with other meanings (40401 is a subject here, a topic there); ``edge``
answers them as they say."""

from __future__ import annotations

from odradek.gateway.errors import GatewayError


class RegistryError(GatewayError):
    status, code = 500, 50001

    def __init__(self, message: str, status: int | None = None, code: int | None = None):
        super().__init__(message)
        if status is not None:
            self.status, self.code = status, code if code is not None else status


class NotFound(RegistryError):
    """An answer that something does not exist, which a replica behind the ``_schemas`` log may
    give wrongly: reads check it against the log's end first (``Registry.fresh``)."""


class SubjectNotFound(NotFound):
    status, code = 404, 40401

    def __init__(self, subject: str):
        super().__init__(f"Subject '{subject}' not found.")


class VersionNotFound(NotFound):
    status, code = 404, 40402

    def __init__(self, subject: str, version) -> None:
        super().__init__(f"Version {version} not found.")


class SchemaNotFound(NotFound):
    status, code = 404, 40403

    def __init__(self, message: str = "Schema not found"):
        super().__init__(message)


class SubjectSoftDeleted(RegistryError):
    status, code = 404, 40404

    def __init__(self, subject: str):
        super().__init__(f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


class SubjectNotSoftDeleted(RegistryError):
    status, code = 404, 40405

    def __init__(self, subject: str):
        super().__init__(f"Subject '{subject}' was not deleted first before being permanently deleted")


class VersionSoftDeleted(RegistryError):
    status, code = 404, 40406

    def __init__(self, subject: str, version: int):
        super().__init__(f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to "
                         "delete permanently")


class VersionNotSoftDeleted(RegistryError):
    status, code = 404, 40407

    def __init__(self, subject: str, version: int):
        super().__init__(f"Subject '{subject}' Version {version} was not deleted first before being "
                         "permanently deleted")


class SubjectLevelConfigNotFound(NotFound):
    status, code = 404, 40408

    def __init__(self, subject: str):
        super().__init__(f"Subject '{subject}' does not have subject-level compatibility configured")


class SubjectLevelModeNotFound(NotFound):
    status, code = 404, 40409

    def __init__(self, subject: str):
        super().__init__(f"Subject '{subject}' does not have subject-level mode configured")


class IncompatibleSchema(RegistryError):
    status, code = 409, 409

    def __init__(self, messages: list[str]):
        super().__init__("Schema being registered is incompatible with an earlier schema for subject; "
                         + "; ".join(messages))
        self.messages = messages


class ReferenceExists(RegistryError):
    status, code = 422, 42206

    def __init__(self, message: str):
        super().__init__(message)


class InvalidSchema(RegistryError):
    status, code = 422, 42201


class InvalidVersion(RegistryError):
    status, code = 422, 42202

    def __init__(self, version) -> None:
        super().__init__(f"The specified version '{version}' is not a valid version id. Allowed values are "
                         "between [1, 2^31-1] and the string \"latest\"")


class InvalidCompatibilityLevel(RegistryError):
    status, code = 422, 42203

    def __init__(self, level) -> None:
        super().__init__(f"Invalid compatibility level. Valid values are none, backward, forward, full, "
                         f"backward_transitive, forward_transitive, and full_transitive (got {level})")


class InvalidMode(RegistryError):
    status, code = 422, 42204

    def __init__(self, mode) -> None:
        super().__init__(f"Invalid mode {mode}. Valid values are READWRITE, READONLY, IMPORT")


class OperationNotPermitted(RegistryError):
    status, code = 422, 42205


class StoreError(RegistryError):
    status, code = 500, 50001


class StoreTimeout(RegistryError):
    status, code = 500, 50002


class ForwardingFailed(RegistryError):
    status, code = 500, 50003


class NotPrimary(RegistryError):
    """This replica is no longer the primary (the group moved ``_schemas``' partition away)."""
    status, code = 500, 50004

    def __init__(self):
        super().__init__("This replica is no longer the primary; retry")
