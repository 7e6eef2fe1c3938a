"""Errors carrying TF Serving's status codes, shared by the gRPC and REST front ends."""

import grpc

# TF Serving's REST API answers each canonical code with this HTTP status.
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.CANCELLED: 499,
}


class ServingError(Exception):
    """A request that cannot be served: a gRPC status code and a message naming the problem.

    Args:
        code: a `grpc.StatusCode`.
        message: what is wrong, e.g. `'input tensor alias not found in signature: x'`.
        http_status: the REST status when it differs from TF Serving's mapping
            of `code` (413 for an oversized body).
        close_connection: the REST answer closes the connection (the rest of
            the body is not read, so the connection cannot be reused).

    Example:

    ```python
    raise ServingError(grpc.StatusCode.NOT_FOUND, "Servable not found for request: Latest(foo)")
    ```
    """

    def __init__(self, code, message, http_status=None, close_connection=False):
        super().__init__(message)
        self.code = code
        self.message = message
        self._http_status = http_status
        self.close_connection = close_connection

    @property
    def http_status(self):
        return self._http_status or HTTP_STATUS.get(self.code, 500)


def invalid(message):
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)
