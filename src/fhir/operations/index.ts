// The booking part's operations and write hooks, loaded once by the FHIR layer.
import { registerBookingHooks } from '../../booking';
import './book';
import './patch';
import './async';

registerBookingHooks();
