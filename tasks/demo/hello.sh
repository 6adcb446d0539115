#!/bin/sh
# Prints the greeting the check expects.
echo "Hello, wrold!"
