# A kernel module that raises an exception that is not an Exception.
class NotAnException(BaseException):
    pass


raise NotAnException("raised while importing")
