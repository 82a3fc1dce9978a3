<?php

declare(strict_types=1);

namespace Pont;

/** 403 CONSENT_REQUIRED: no active consent of the patient covers the access. */
class ConsentRequiredError extends AuthorizationError
{
}
